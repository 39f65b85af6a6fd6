"""The casebook playbooks end to end on the simulated runner and the casebook policy.

Where the simulator (following SGLang's real semantics) does not reproduce a casebook decision, the
assertion states what it decides and docs/tuning.md says why.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from service.cli import main
from service.plugin_host import PluginHost

HOST = PluginHost()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif("simulated" not in HOST.components("runner") or "casebook" not in HOST.components("policy"),
                       reason="needs the simulated runner and the casebook policy"),
]


def tune(playbook: str, *extra: str) -> dict:
    result = CliRunner().invoke(main, ["tune", "--playbook", playbook, "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def kept(report: dict) -> list[str]:
    return [r["delta"]["summary"] for r in report["rounds"] if r["delta"] and r["verdict"] in ("accept",
                                                                                              "keep_tradeoff")]


@pytest.fixture(scope="module")
def nightly() -> dict:
    return tune("nightly-batch")


@pytest.fixture(scope="module")
def structured() -> dict:
    return tune("structured-output")


def test_nightly_batch_picks_9b_by_the_quality_table(nightly: dict) -> None:
    screened = {r["delta"]["model"]: r for r in nightly["rounds"] if r["technique"] == "model_selection"}
    assert screened["Qwen/Qwen3.6-2B"]["verdict"] == "rollback" and screened["Qwen/Qwen3.6-2B"]["result"] is None
    assert screened["Qwen/Qwen3.6-4B"]["verdict"] == "rollback"
    assert screened["Qwen/Qwen3.6-9B"]["verdict"] == "accept"
    assert nightly["final"]["model"] == "Qwen/Qwen3.6-9B"
    argv = nightly["final"]["launch_commands"][0]["argv"]
    assert argv[argv.index("--model-path") + 1] == "Qwen/Qwen3.6-9B"


def test_nightly_batch_tries_removing_speculation_and_maximising_the_batch(nightly: dict) -> None:
    techniques = [r["technique"] for r in nightly["rounds"]]
    assert "speculative_decoding" in techniques and "batch_parameters" in techniques
    removal = next(r for r in nightly["rounds"] if r["technique"] == "speculative_decoding")
    assert removal["delta"]["set_server"]["speculative_algorithm"] is None


def test_structured_output_reaches_zero_failures_with_xgrammar(structured: dict) -> None:
    grammar = structured["rounds"][1]
    assert grammar["delta"]["set_server"] == {"grammar_backend": "xgrammar"}
    assert grammar["verdict"] in ("accept", "keep_tradeoff")
    assert grammar["result"]["failure_rate"] == 0.0
    assert "--grammar-backend" in structured["final"]["launch_commands"][0]["argv"]
    assert any(r["technique"] == "prompt_structure" for r in structured["rounds"])


def test_every_round_carries_the_documented_keys(structured: dict) -> None:
    for round_ in structured["rounds"]:
        assert {"index", "technique", "delta", "verdict", "pattern", "reasons", "result"} <= set(round_)
        assert round_["reasons"]
    assert {"met", "checks"} == set(structured["slo"])
    assert [c["name"] for c in structured["slo"]["checks"]]


def test_coding_assistant_ends_with_fp8_target_and_eagle3_and_meets_the_slo() -> None:
    report = tune("coding-assistant")
    assert report["slo"]["met"]
    assert any(s.startswith("EAGLE3") for s in kept(report))
    assert [r["technique"] for r in report["rounds"]][:4] == ["baseline", "chunked_prefill", "quantization",
                                                              "speculative_decoding"]


def test_document_qa_recommends_prompt_reordering_and_keeps_hicache_write_through() -> None:
    report = tune("document-qa-rag")
    assert report["rounds"][1]["delta"]["summary"].endswith("round_robin router")
    summaries = kept(report)
    assert "prompt re-ordered: fixed parts first, variable last" in summaries
    assert "HiCache ratio 2, page 64, write_through" in summaries
    assert "prompt-structure.md" in report["final"]["artifacts"]
