"""Bad scenarios at the command line: `validate`, `round` and `tune` refuse each one before any round.

`round` and `tune` exit with status 2 and one line on stderr naming the field and the fix, never a traceback,
and the local runner starts nothing: its log folder, where every launched process writes its log, stays
empty. A control round of a valid scenario shows the same folder filling when a process does start.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from service.cli import main
from service.scenario import load_scenario, parse_scenario
from service.scenario_check import check_candidate, check_scenario
from service.sglang import errors
from tests.e2e.bad_inputs import BAD_INPUTS, BASE, BadInput

IDS = [bad.name for bad in BAD_INPUTS]


@pytest.fixture
def local_runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Runner settings for `--runner local` on the emulator; returns the folder every launch logs into."""
    logs = tmp_path / "runner-logs"
    for key, value in {"LOG_DIR": str(logs), "ENGINE": "emulator", "TIME_SCALE": "0.25", "REMAP_PORTS": "true",
                       "STATE_DIR": str(tmp_path / "state")}.items():
        monkeypatch.setenv(f"SGLANG_TUNER_RUNNER_{key}", value)
    return logs


def _write(bad: BadInput, folder: Path) -> Path:
    path = folder / f"{bad.name}.toml"
    path.write_text(bad.toml(), encoding="utf-8")
    return path


def _launched(logs: Path) -> list[str]:
    return sorted(p.name for p in logs.rglob("*")) if logs.exists() else []


def test_the_unedited_scenario_passes_so_each_refusal_below_is_its_edit() -> None:
    assert errors(check_scenario(load_scenario(BASE))) == []


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=IDS)
def test_the_check_names_the_field_and_says_what_to_do(bad: BadInput) -> None:
    blocking = errors(check_scenario(parse_scenario(bad.toml(), source=bad.name)))
    assert blocking, f"{bad.name} passed the check"
    assert blocking[0].field == bad.field
    assert bad.words in f"{blocking[0].message}; {blocking[0].hint}"
    # The candidate check is the same check, errors only.
    assert check_candidate(parse_scenario(bad.toml(), source=bad.name)) == blocking


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=IDS)
def test_validate_refuses_it(bad: BadInput, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["validate", str(_write(bad, tmp_path)), "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["valid"] is False
    assert bad.field in [issue["field"] for issue in report["issues"] if issue["severity"] == "error"]


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=IDS)
def test_round_refuses_it_with_status_2_and_starts_nothing(bad: BadInput, tmp_path: Path, local_runner: Path) -> None:
    path = _write(bad, tmp_path)
    result = CliRunner().invoke(main, ["round", str(path), "--runner", "local"])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {path}: {bad.field}: "), lines
    assert bad.words in lines[0]
    assert _launched(local_runner) == []


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=IDS)
def test_tune_refuses_it_with_status_2_and_runs_no_round(bad: BadInput, tmp_path: Path, local_runner: Path) -> None:
    path = _write(bad, tmp_path)
    result = CliRunner().invoke(main, ["tune", "--playbook", "coding-assistant", "--scenario", str(path),
                                       "--runner", "local"])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{bad.field}: " in lines[0] and bad.words in lines[0], lines
    assert result.stdout == ""  # no report: no round ran
    assert _launched(local_runner) == []


@pytest.mark.parametrize("name", ["shell-in-model", "negative-bench-concurrency", "tp16-on-one-8-gpu-node"])
def test_the_installed_command_refuses_without_a_traceback(name: str, tmp_path: Path, local_runner: Path) -> None:
    bad = next(b for b in BAD_INPUTS if b.name == name)
    path = _write(bad, tmp_path)
    for args in (["round", str(path), "--runner", "local"],
                 ["tune", "--playbook", "coding-assistant", "--scenario", str(path), "--runner", "local"]):
        done = subprocess.run([str(Path(sys.executable).with_name("sglang-tuner")), *args], capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert bad.field in done.stderr
    assert _launched(local_runner) == []


@pytest.mark.slow
def test_control_a_valid_round_does_fill_the_log_folder(tmp_path: Path, local_runner: Path) -> None:
    # Without this, an empty log folder could mean the harness never sees launches at all.
    text = BASE.read_text(encoding="utf-8")
    for old, new in (("tp-size = 8", "tp-size = 1"), ("num_prompts = 500", "num_prompts = 4"),
                     ("max_concurrency = 25", "max_concurrency = 2"), ("warmup_requests = 30", "warmup_requests = 1"),
                     ("input = { median = 2100, p95 = 28000 }", 'input = { median = 200, kind = "fixed" }'),
                     ("output = { median = 400, p95 = 1800 }", 'output = { median = 16, kind = "fixed" }')):
        text = text.replace(old, new)
    path = tmp_path / "tiny.toml"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["round", str(path), "--runner", "local"])
    assert result.exit_code == 0, result.output
    assert "worker-0.log" in _launched(local_runner)


def test_a_dangerous_flag_passes_only_where_the_operator_allows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # The door reads the same runner settings the runners launch with, so it refuses exactly what they would.
    text = BASE.read_text(encoding="utf-8").replace(
        "enable-metrics = true", 'enable-metrics = true\nextra = { "--trust-remote-code" = true }')
    scenario = parse_scenario(text)
    refused = errors(check_scenario(scenario))
    assert [issue.field for issue in refused] == ["deployment.groups[0].server.extra.--trust-remote-code"]
    assert "an operator must allow" in refused[0].hint
    monkeypatch.setenv("SGLANG_TUNER_RUNNER_ALLOW_FLAGS", "--trust-remote-code")
    assert errors(check_scenario(scenario)) == []
    assert errors(check_scenario(scenario, allow=())) == refused  # an explicit list (validate --allow) wins
