"""`sglang-tuner render`, `validate` and `flags` through click's CliRunner."""

from __future__ import annotations

import json

import click
from click.testing import CliRunner

from service.cli import render

from .conftest import CODING_FINAL


def _run(*args: str):
    # The commands exactly as `sglang-tuner` registers them, without importing every other command module.
    group = click.Group("sglang-tuner")
    render.register(group)
    return CliRunner().invoke(group, list(args))


def test_render_json_prints_the_casebook_final_launch():
    result = _run("render", str(CODING_FINAL), "--sglang-version", "0.5.23", "--json")
    assert result.exit_code == 0, result.output
    launch = json.loads(result.output)
    assert [w["env"]["CUDA_VISIBLE_DEVICES"] for w in launch["workers"]] == ["0,1", "2,3", "4,5", "6,7"]
    assert [w["port"] for w in launch["workers"]] == [30001, 30002, 30003, 30004]
    assert "cache_aware" in launch["router"]["argv"]


def test_render_defaults_to_the_scenarios_version_and_prints_commands():
    result = _run("render", str(CODING_FINAL))
    assert result.exit_code == 0, result.output
    assert "# sglang 0.5.23: 4 worker process(es)" in result.output
    assert "CUDA_VISIBLE_DEVICES=6,7 python -m sglang.launch_server" in result.output


def test_render_refuses_enable_ep_moe_on_0_5_23_without_a_traceback(tmp_path):
    path = tmp_path / "ep.toml"
    path.write_text(CODING_FINAL.read_text().replace("enable-metrics = true",
                                                     "enable-metrics = true\nextra = { \"--enable-ep-moe\" = true }"))
    result = _run("render", str(path), "--sglang-version", "0.5.23")
    assert result.exit_code == 1
    assert ("--enable-ep-moe was removed after 0.5.2; use --ep-size equal to --tp-size (an all-to-all also "
            "needs --moe-a2a-backend)") in result.output
    assert "Traceback" not in result.output
    assert _run("render", str(path), "--sglang-version", "0.5.2").exit_code == 0


def test_validate_exits_1_and_lists_the_issues(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(CODING_FINAL.read_text().replace("replicas = 4", "replicas = 5"))
    result = _run("validate", str(path), "--json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["valid"] is False
    assert any("needs 10 GPUs; the hardware has 8" in issue["message"] for issue in report["issues"])
    assert _run("validate", str(CODING_FINAL)).exit_code == 0


def test_missing_scenario_file_is_a_clear_error():
    result = _run("render", "no-such-scenario.toml")
    assert result.exit_code != 0 and "no-such-scenario.toml" in result.output and "Traceback" not in result.output


def test_flags_shows_one_flag_with_its_status_and_lists_all():
    result = _run("flags", "--sglang-version", "0.5.23", "--enable-dp-attention")
    assert result.exit_code == 0, result.output
    assert "refused: --enable-dp-attention is deprecated in sglang 0.5.23" in result.output
    listing = _run("flags", "--sglang-version", "0.5.2", "--json")
    assert len(json.loads(listing.output)["flags"]) == 210
    unknown = _run("flags", "--sglang-version", "0.5.23", "--enable-metrix")
    assert unknown.exit_code == 1 and "did you mean --enable-metrics" in unknown.output
    assert "known versions" in _run("flags", "--sglang-version", "9.9").output


def test_render_prints_the_benchmark_command_for_the_versions_module():
    new = _run("render", str(CODING_FINAL), "--sglang-version", "0.5.23")
    assert new.exit_code == 0, new.output
    bench = new.output.splitlines()[-1].split()
    assert bench[:3] == ["python", "-m", "sglang.benchmark.serving"]
    assert bench[bench.index("--base-url") + 1] == "http://127.0.0.1:30000"  # the router, not a worker
    assert "--goodput" in bench and "--cache-report" in bench
    old = _run("render", str(CODING_FINAL), "--sglang-version", "0.5.2")
    assert old.exit_code == 0, old.output
    assert old.output.splitlines()[-1].split()[:3] == ["python", "-m", "sglang.bench_serving"]
    assert "--goodput" not in old.output
    as_json = json.loads(_run("render", str(CODING_FINAL), "--sglang-version", "0.5.15", "--json").output)
    assert as_json["bench"][:3] == ["python", "-m", "sglang.benchmark.serving"]


def test_flags_lists_the_smg_router_and_its_policies():
    listed = _run("flags", "--router", "--router-package", "smg")
    assert listed.exit_code == 0, listed.output
    assert listed.output.startswith("# smg 1.13.0:")
    policy = _run("flags", "--router", "--router-package", "smg", "--policy")
    assert "prefix_hash" in policy.output and "least_load" in policy.output
    frozen = _run("flags", "--router", "--policy")
    assert "prefix_hash" not in frozen.output and "present in: 0.3.2" in frozen.output
