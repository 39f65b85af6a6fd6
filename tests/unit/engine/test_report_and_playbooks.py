"""The report's JSON and Markdown shapes, and strict playbook files."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest

from service import Playbook
from service.engine import EngineParts, TuningEngine, report_json, report_markdown
from service.playbooks import InputFileError, check_playbook, load_playbook
from service.plugin_host import PluginHost
from tests.unit.engine.fakes import FakeRunner, SweepTechnique, ThroughputPolicy, chunk_figures, model_spec, scenario


@pytest.fixture(scope="module")
def outcome():
    parts = EngineParts(techniques={"sweep": SweepTechnique([4096, 2048])}, runner=FakeRunner(chunk_figures),
                        policy=ThroughputPolicy(), resolve=model_spec)
    return asyncio.run(TuningEngine(parts, Playbook(name="p", techniques=["sweep"]), scenario()).run())


def test_json_report_has_the_documented_shape(outcome) -> None:
    body = msgspec.json.decode(msgspec.json.encode(report_json(outcome.report)))
    assert set(body) >= {"job", "rounds", "final", "slo"}
    assert body["job"]["state"] == "succeeded" and body["job"]["seed"] == 0
    first = body["rounds"][1]
    assert set(first) >= {"index", "technique", "delta", "verdict", "pattern", "reasons", "result"}
    assert first["delta"]["set_server"] == {"chunked_prefill_size": 4096}
    assert first["result"]["bench"]["p99_ttft_ms"] == 1621.0 and "server" in first["result"]
    assert "samples" not in first["result"]
    assert body["final"]["launch_commands"][0]["argv"][:3] == ["python", "-m", "sglang.launch_server"]
    assert "--chunked-prefill-size" in body["final"]["launch_commands"][0]["argv"]
    assert body["final"]["router_command"] is None
    assert body["slo"] == {"met": True, "checks": []}


def test_markdown_report_is_a_cumulative_table(outcome) -> None:
    text = report_markdown(outcome)
    assert "| 1 | chunk 4096 | 1499 |" in text
    assert "| 2 | chunk 2048 | 1402 |" in text and "rollback" in text
    assert "tok/s -3.5%, p99 TTFT -63.0%" in text  # the kept round against round 0
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 python -m sglang.launch_server" in text


def test_unknown_key_names_file_line_and_nearest_key(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('name = "p"\ntechniques = ["chunked_prefill"]\nmax_round = 3\n')
    with pytest.raises(InputFileError) as err:
        load_playbook(path)
    assert err.value.line == 3 and "max_rounds" in str(err.value) and str(path) in str(err.value)


def test_unknown_technique_and_runner_name_the_nearest_valid_one(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('name = "p"\n# comment\ntechniques = ["chunked_prefill", "quantisation"]\nrunner = "simulatd"\n')
    playbook = load_playbook(path)
    with pytest.raises(InputFileError, match="did you mean `quantization`") as err:
        check_playbook(playbook, techniques=["chunked_prefill", "quantization"], runners=["simulated"],
                       policies=["casebook"])
    assert err.value.line == 3
    fixed = msgspec.structs.replace(playbook, techniques=["chunked_prefill"])
    with pytest.raises(InputFileError, match="did you mean `simulated`") as err:
        check_playbook(fixed, techniques=["chunked_prefill"], runners=["simulated"], policies=["casebook"])
    assert err.value.line == 4


def test_every_shipped_playbook_names_registered_components() -> None:
    host = PluginHost()
    playbooks = host.components("playbook")
    assert set(playbooks) >= {"coding-assistant", "document-qa-rag", "nightly-batch", "structured-output",
                              "moe-at-scale", "auto"}
    for playbook in playbooks.values():
        check_playbook(playbook, techniques=host.components("technique"), runners=["simulated"],
                       policies=host.components("policy"))
        if playbook.name != "auto":
            assert playbook.scenario and playbook.scenario.endswith(f"{playbook.name}-round0.toml")
