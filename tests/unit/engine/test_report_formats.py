"""Stored reports of the earlier shape still load; the report's rounds carry the figures their decisions used."""

from __future__ import annotations

import asyncio
from typing import ClassVar

import msgspec

from service import ConfigDelta, Playbook, TuningContext, hookimpl
from service.engine import EngineParts, TuningEngine, load_report, render_markdown, report_json, round_context
from service.plugin_host import PluginHost
from tests.unit.engine.fakes import FakeRunner, SweepTechnique, ThroughputPolicy, chunk_figures, model_spec, scenario

# Keys the report gained with the typed `TuningReport`; a report stored before has none of them.
NEW_KEYS = {"headline", "capacity", "format"}
NEW_JOB_KEYS = {"created_at", "finished_at"}
NEW_ROUND_KEYS = {"source"}


def _outcome():  # type: ignore[no-untyped-def]
    parts = EngineParts(techniques={"sweep": SweepTechnique([4096, 2048])}, runner=FakeRunner(chunk_figures),
                        policy=ThroughputPolicy(), resolve=model_spec)
    return asyncio.run(TuningEngine(parts, Playbook(name="p", techniques=["sweep"], repeats=2), scenario()).run())


def test_a_report_stored_in_the_earlier_shape_loads_and_renders() -> None:
    outcome = _outcome()
    earlier = report_json(outcome.report)
    for key in NEW_KEYS:
        earlier.pop(key)
    for key in NEW_JOB_KEYS:
        earlier["job"].pop(key)
    for round_ in earlier["rounds"]:
        for key in NEW_ROUND_KEYS:
            round_.pop(key)
    loaded = load_report(msgspec.json.decode(msgspec.json.encode(earlier)))
    assert loaded is not None and loaded.job.state == "succeeded" and loaded.headline == []
    assert [r.verdict for r in loaded.rounds] == [r.verdict for r in outcome.report.rounds]
    assert loaded.final.launch_commands == outcome.report.final.launch_commands
    assert "| 1 | chunk 4096 | 1499 |" in render_markdown(loaded)


def test_an_unrecognised_stored_report_is_none_not_an_error() -> None:
    assert load_report({"cancelled": True, "last_accepted_round": 0}) is None
    assert load_report(None) is None and load_report("text") is None


def test_report_rounds_show_the_mean_over_repeats_the_decision_used() -> None:
    outcome = _outcome()
    round_ = outcome.job.rounds[1]
    shown = outcome.report.rounds[1]
    assert shown.repeats == len(round_.results) == 2
    assert shown.result.bench.output_throughput == sum(r.bench.output_throughput for r in round_.results) / 2
    assert shown.source == "simulated"


def test_the_cost_model_is_chosen_in_one_place_by_the_plugins_select_hook() -> None:
    class PreferRoofline:
        @hookimpl
        def select_cost_model(self, gpu: str, model: str) -> str | None:
            return "roofline" if gpu == "H200-SXM" else None

    host = PluginHost(plugins=[("prefer", PreferRoofline())])
    assert round_context(host, scenario()).cost_model == "roofline"
    assert round_context(host, scenario(), "aiconfigurator").cost_model == "aiconfigurator"  # asked by name


class UncheckedFp8(SweepTechnique):
    """A kept change whose quality was never measured (FP8 without a quality result)."""

    name: ClassVar[str] = "fp8_unchecked"

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        return [ConfigDelta(technique=self.name, summary="FP8 weights", set_server={"chunked_prefill_size": 4096},
                            quality_check="adopt only after a quality check: no quality result for FP8")]


def test_a_kept_change_without_a_quality_result_is_flagged_in_the_first_lines() -> None:
    parts = EngineParts(techniques={"fp8_unchecked": UncheckedFp8([4096])}, runner=FakeRunner(chunk_figures),
                        policy=ThroughputPolicy(), resolve=model_spec)
    outcome = asyncio.run(TuningEngine(parts, Playbook(name="p", techniques=["fp8_unchecked"]), scenario()).run())
    assert outcome.report.rounds[1].verdict in ("accept", "keep_tradeoff")
    assert "Round 1 (FP8 weights): adopt only after a quality check: no quality result for FP8." in (
        outcome.report.headline)
    first_lines = render_markdown(outcome.report).splitlines()[:6]
    assert any("adopt only after a quality check" in line for line in first_lines)


def test_a_failed_round_shows_its_failure_not_zeros() -> None:
    runner = FakeRunner(chunk_figures, fail_after=1)
    parts = EngineParts(techniques={"sweep": SweepTechnique([4096])}, runner=runner, policy=ThroughputPolicy(),
                        resolve=model_spec)
    outcome = asyncio.run(TuningEngine(parts, Playbook(name="p", techniques=["sweep"]), scenario()).run())
    failed = outcome.report.rounds[1]
    assert failed.verdict == "error" and failed.result.status.value != "ok"
    row = next(line for line in render_markdown(outcome.report).splitlines() if line.startswith("| 1 |"))
    assert row == "| 1 | chunk 4096 | - | - | - | - | - | - | - | - | - | error | simulated |"
