"""Alternatives are judged against the same baseline and the best kept one wins; sweeps go step by step."""

from __future__ import annotations

import asyncio
from typing import ClassVar

import msgspec

from service import (
    SLO,
    Applicability,
    ConfigDelta,
    Decision,
    Objective,
    Playbook,
    RoundResult,
    RouterConfig,
    Scenario,
    Technique,
    TuningContext,
    Verdict,
)
from service.engine import EngineParts, TuningEngine, TuningOutcome, report_json
from service.engine.measure import mean_result
from tests.unit.engine.fakes import FakeRunner, ThroughputPolicy, model_spec, ok_result, scenario

ROUTING = {None: 1455.0, "round_robin": 1288.0, "power_of_two": 1600.0, "cache_aware": 2741.0}


def routing_figures(scen: Scenario) -> dict[str, float]:
    """Casebook case 2 round 1: round-robin loses to one TP4 instance, cache_aware wins by far."""
    router = scen.deployment.router
    tput = ROUTING[router.policy if router else None]
    return {"output_throughput": tput, "p99_ttft_ms": 3722.0 * 1455.0 / tput, "median_ttft_ms": 1843.0,
            "p95_ttft_ms": 3000.0, "median_itl_ms": 14.0}


class Routing(Technique):
    name: ClassVar[str] = "router_policy"
    rank: ClassVar[int] = 4

    def __init__(self, policies: list[str]) -> None:
        self.policies = policies

    def applicable(self, ctx: TuningContext) -> Applicability:
        return Applicability(True, "routing decides the cache in this test")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        return [ConfigDelta(technique=self.name, summary=f"router {p}", router=RouterConfig(policy=p))
                for p in self.policies]


class Steps(Technique):
    """Successive steps: mem-fraction 0.94 then 0.96, then client concurrency (casebook case 3)."""

    name: ClassVar[str] = "batch_parameters"
    rank: ClassVar[int] = 6
    stepwise: ClassVar[bool] = True

    def applicable(self, ctx: TuningContext) -> Applicability:
        return Applicability(True, "there is no latency SLO in this test")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        return [ConfigDelta(technique=self.name, summary=f"mem {m}", set_server={"mem_fraction_static": m})
                for m in (0.94, 0.96)] + [ConfigDelta(technique=self.name, summary="clients 1024",
                                                      client_concurrency=1024)]


def mem_figures(scen: Scenario) -> dict[str, float]:
    mem = scen.deployment.groups[0].server.mem_fraction_static
    tput = {None: 7104.0, 0.94: 9439.0, 0.96: 8712.0}[mem]
    if scen.bench.max_concurrency == 1024:
        tput = 9402.0
    return {"output_throughput": tput, "p99_ttft_ms": 1000.0, "median_ttft_ms": 100.0, "p95_ttft_ms": 900.0,
            "median_itl_ms": 36.0}


class RecordingPolicy(ThroughputPolicy):
    """The fake policy, noting which baseline figure each candidate was judged against."""

    def __init__(self) -> None:
        self.baselines: list[float] = []

    def decide(self, baseline: list[RoundResult], candidate: list[RoundResult], slo: SLO,
               objective: Objective) -> Decision:
        self.baselines.append(baseline[0].bench.output_throughput)
        return super().decide(baseline, candidate, slo, objective)


def run(technique: Technique, figures, playbook: Playbook, policy=None) -> tuple[TuningOutcome, FakeRunner]:
    runner = FakeRunner(figures)
    parts = EngineParts(techniques={technique.name: technique}, runner=runner, policy=policy or ThroughputPolicy(),
                        resolve=model_spec)
    scen = scenario(objective=Objective(kind="throughput"))
    return asyncio.run(TuningEngine(parts, playbook, scen).run()), runner


def verdicts(outcome: TuningOutcome) -> list[tuple[str, str]]:
    return [(r.delta.summary if r.delta else "baseline", r.decision.verdict.value) for r in outcome.job.rounds]


def test_alternatives_are_each_judged_against_the_same_baseline() -> None:
    policy = RecordingPolicy()
    outcome, _ = run(Routing(["round_robin", "cache_aware"]), routing_figures,
                     Playbook(name="p", techniques=["router_policy"]), policy)
    assert policy.baselines == [1455.0, 1455.0]
    assert verdicts(outcome) == [("baseline", "accept"), ("router round_robin", "rollback"),
                                 ("router cache_aware", "accept")]
    assert outcome.final.deployment.router.policy == "cache_aware"


def test_the_best_kept_alternative_wins_and_the_others_say_why_not() -> None:
    outcome, _ = run(Routing(["power_of_two", "cache_aware"]), routing_figures,
                     Playbook(name="p", techniques=["router_policy"]))
    power_of_two = outcome.job.rounds[1]
    assert power_of_two.decision.verdict is Verdict.ROLLBACK
    assert "router cache_aware" in power_of_two.decision.reasons[0]
    assert "accept" in power_of_two.decision.reasons[0]  # the policy's own verdict stays visible
    assert outcome.final.deployment.router.policy == "cache_aware"
    assert outcome.final_results[0].bench.output_throughput == 2741.0


def test_stepwise_steps_are_judged_against_the_last_accepted_step() -> None:
    policy = RecordingPolicy()
    outcome, _ = run(Steps(), mem_figures, Playbook(name="p", techniques=["batch_parameters"]), policy)
    assert verdicts(outcome) == [("baseline", "accept"), ("mem 0.94", "accept"), ("mem 0.96", "rollback"),
                                 ("clients 1024", "rollback")]
    assert policy.baselines == [7104.0, 9439.0, 9439.0]
    assert outcome.final.deployment.groups[0].server.mem_fraction_static == 0.94


def test_playbook_bench_settings_apply_to_every_round() -> None:
    outcome, runner = run(Routing(["cache_aware"]), routing_figures,
                          Playbook(name="p", techniques=["router_policy"], bench={"num_prompts": 120}))
    assert {scen.bench.num_prompts for scen, _ in runner.calls} == {120}
    assert outcome.final.bench.num_prompts == 120


def test_report_quotes_figures_averaged_over_repeats() -> None:
    results = [ok_result(output_throughput=900.0, p99_ttft_ms=1000.0),
               ok_result(output_throughput=1100.0, p99_ttft_ms=1200.0)]
    mean = mean_result(results)
    assert (mean.bench.output_throughput, mean.bench.p99_ttft_ms) == (1000.0, 1100.0)
    outcome, _ = run(Routing(["cache_aware"]), routing_figures,
                     Playbook(name="p", techniques=["router_policy"], repeats=2))
    report = report_json(outcome.report)
    assert [r["repeats"] for r in report["rounds"]] == [2, 2]
    assert report["rounds"][1]["result"]["bench"]["output_throughput"] == 2741.0
    assert msgspec.json.encode(report)
