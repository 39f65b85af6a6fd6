"""Stored reports of the earlier shape still load; the report's rounds carry the figures their decisions used."""

from __future__ import annotations

import asyncio

import msgspec

from service import Playbook, hookimpl
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
