"""The charts' data in the report: each round's figures and repeats, what it changed, and every measured deployment on
the Pareto frontiers with the chosen one marked."""

from __future__ import annotations

import asyncio

import msgspec

from service import Playbook
from service.domain import SLO, RouterConfig
from service.engine import EngineParts, TuningEngine, replayed_charts, report_json
from service.engine.charts import flag_changes, pareto_flags
from tests.unit.engine.fakes import FakeRunner, SweepTechnique, ThroughputPolicy, chunk_figures, model_spec, scenario

SLO_TTFT = SLO(ttft_p95_ms=4000.0)


def _outcome():  # type: ignore[no-untyped-def]
    parts = EngineParts(techniques={"sweep": SweepTechnique([4096, 2048, 1024])}, runner=FakeRunner(chunk_figures),
                        policy=ThroughputPolicy(), resolve=model_spec)
    initial = scenario(slo=SLO_TTFT)
    playbook = Playbook(name="p", techniques=["sweep"], repeats=2)
    return initial, asyncio.run(TuningEngine(parts, playbook, initial).run())


def test_pareto_flags_keep_the_points_no_other_beats_on_both_figures() -> None:
    points = [{"tput": 10.0, "ttft": 100.0}, {"tput": 12.0, "ttft": 120.0}, {"tput": 9.0, "ttft": 130.0},
              {"tput": 10.0, "ttft": 100.0}, {"tput": 8.0, "ttft": None}]
    flags = pareto_flags(points, [("tput", True), ("ttft", False)])
    # The third is beaten by the first on both; equal points do not beat each other; a missing figure is on no frontier.
    assert flags == [True, True, False, True, False]


def test_the_report_charts_every_measured_deployment_with_the_chosen_one_on_the_frontier() -> None:
    _, outcome = _outcome()
    report = outcome.report
    charts = report.charts
    assert charts is not None
    measured = [r.index for r in outcome.job.rounds if r.results]
    assert [d.round for d in charts.deployments] == measured == [r.index for r in charts.rounds]
    assert charts.chosen == report.path[-1]
    chosen = [d for d in charts.deployments if d.chosen]
    assert len(chosen) == 1 and chosen[0].round == charts.chosen and chosen[0].pareto
    assert all(d.gpus == 8 and d.source == "simulated" for d in charts.deployments)
    first = charts.deployments[0]
    assert first.figures["output_throughput_per_gpu"] == first.figures["output_throughput"] / 8
    assert first.figures["output_throughput"] == 1554.0 and first.slo_met is True
    assert [t.name for t in charts.targets] == ["ttft_p95_ms"] and charts.targets[0].target == 4000.0
    # Repeats are every repeat's figure; the round's figure is their mean (what the decision used).
    one = charts.rounds[1]
    assert len(one.repeats["output_throughput"]) == 2 == report.rounds[1].repeats
    assert one.figures["output_throughput"] == sum(one.repeats["output_throughput"]) / 2
    assert report_json(report)["charts"]["deployments"][0]["frontiers"].keys() == {
        "p95_ttft_ms", "median_itl_ms", "cost_per_1m_output_tokens"}


def test_each_round_shows_the_flags_it_changed_against_the_deployment_it_was_judged_against() -> None:
    _, outcome = _outcome()
    rounds = {r.index: r for r in outcome.report.charts.rounds}
    assert rounds[0].changes == []
    change = rounds[1].changes
    assert [(c.where, c.flag, c.before, c.after) for c in change] == [("worker", "--chunked-prefill-size", None, 4096)]
    # Round 2 changed round 1's deployment when round 1 was kept, else the starting one.
    base = 4096 if outcome.job.rounds[1].decision.verdict.keeps_candidate() else None
    assert [(c.before, c.after) for c in rounds[2].changes] == [(base, 2048)]


def test_the_charts_rebuilt_from_the_rounds_alone_equal_the_engines() -> None:
    initial, outcome = _outcome()
    rebuilt = replayed_charts(initial, outcome.job.rounds, outcome.report.charts.chosen)
    assert msgspec.json.encode(rebuilt) == msgspec.json.encode(outcome.report.charts)


def test_flag_changes_name_replicas_router_and_model() -> None:
    before = scenario()
    group = before.deployment.groups[0]
    server = msgspec.structs.replace(group.server, tp_size=4)
    after = msgspec.structs.replace(before, model="org/small-9B", deployment=msgspec.structs.replace(
        before.deployment, groups=[msgspec.structs.replace(group, replicas=2, server=server)],
        router=RouterConfig(policy="cache_aware")))
    changes = {(c.where, c.flag): (c.before, c.after) for c in flag_changes(before, after)}
    assert changes[("", "model")] == ("org/big-27B", "org/small-9B")
    assert changes[("worker", "replicas")] == (1, 2) and changes[("worker", "--tp-size")] == (8, 4)
    assert changes[("router", "--policy")] == (None, "cache_aware")
