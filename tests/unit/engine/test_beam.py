"""The beam: a candidate only the SLO (or noise) kept out becomes a branch the later techniques are tried on;
the job ends on the best SLO-passing line, the report shows the path, and a resume rebuilds the lines."""

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
    Pattern,
    Playbook,
    Policy,
    RoundResult,
    RouterConfig,
    Scenario,
    Technique,
    TuningContext,
    Verdict,
)
from service.domain import JobState, RoundState
from service.engine import EngineParts, MemoryJournal, TuningEngine
from service.engine.render import render_markdown
from tests.unit.engine.fakes import FakeRunner, model_spec, scenario

TARGET = SLO(ttft_p95_ms=1000.0)


def figures(scen: Scenario) -> dict[str, float]:
    """Casebook case 2 in miniature: the prompt fix alone lifts throughput but its prefill burst misses the
    TTFT p95 target; cache_aware alone changes nothing while the prefix is broken; together both pay."""
    fixed = scen.deployment.groups[0].server.chunked_prefill_size == 4096  # stands for the re-ordered prompt
    cache_aware = scen.deployment.router is not None and scen.deployment.router.policy == "cache_aware"
    tput, p95 = {(False, False): (1000.0, 900.0), (True, False): (1500.0, 1100.0),
                 (False, True): (1000.0, 900.0), (True, True): (3000.0, 500.0)}[fixed, cache_aware]
    return {"output_throughput": tput, "p95_ttft_ms": p95, "p99_ttft_ms": p95 * 1.5, "median_ttft_ms": p95 / 2,
            "median_itl_ms": 20.0}


class SLOGatePolicy(Policy):
    """Accepts +3% throughput within the TTFT p95 target; a win that misses the target is an SLO-vetoed win."""

    name: ClassVar[str] = "gate"

    def decide(self, baseline: list[RoundResult], candidate: list[RoundResult], slo: SLO,
               objective: Objective) -> Decision:
        b, c = baseline[0].bench, candidate[0].bench
        gain = (c.output_throughput - b.output_throughput) / b.output_throughput
        missed = slo.ttft_p95_ms is not None and c.p95_ttft_ms > slo.ttft_p95_ms
        if gain >= 0.03 and missed:
            return Decision(verdict=Verdict.ROLLBACK, pattern=Pattern.THROUGHPUT_UP_LATENCY_UP, slo_vetoed_win=True,
                            reasons=[f"throughput {gain:+.0%}, rolled back: breaks an SLO the baseline met"])
        if gain >= 0.03:
            return Decision(verdict=Verdict.ACCEPT, pattern=Pattern.THROUGHPUT_UP_LATENCY_DOWN,
                            reasons=[f"throughput {gain:+.0%}"])
        return Decision(verdict=Verdict.ROLLBACK, pattern=Pattern.NOTHING_CHANGED, reasons=["nothing changed"])


class PromptFix(Technique):
    name: ClassVar[str] = "prompt_structure"
    rank: ClassVar[int] = 3

    def applicable(self, ctx: TuningContext) -> Applicability:
        return Applicability(ctx.scenario.deployment.groups[0].server.chunked_prefill_size != 4096, "broken prefix")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        return [ConfigDelta(technique=self.name, summary="prompt re-ordered", set_server={"chunked_prefill_size": 4096})]


class CacheAware(Technique):
    name: ClassVar[str] = "router_policy"
    rank: ClassVar[int] = 4

    def applicable(self, ctx: TuningContext) -> Applicability:
        return Applicability(True, "replicas behind a router")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        return [ConfigDelta(technique=self.name, summary="router cache_aware", router=RouterConfig(policy="cache_aware"))]


def _engine(runner: FakeRunner, *, width: int = 2, journal: MemoryJournal | None = None) -> TuningEngine:
    parts = EngineParts(techniques={"prompt_structure": PromptFix(), "router_policy": CacheAware()}, runner=runner,
                        policy=SLOGatePolicy(), resolve=model_spec)
    book = Playbook(name="p", techniques=["prompt_structure", "router_policy"], beam_width=width)
    start = msgspec.structs.replace(scenario(), slo=TARGET, objective=Objective(kind="throughput"))
    return TuningEngine(parts, book, start, journal=journal)


def test_a_win_the_slo_vetoed_is_walked_as_a_branch_and_the_job_ends_on_the_best_passing_line() -> None:
    journal = MemoryJournal()
    outcome = asyncio.run(_engine(FakeRunner(figures), journal=journal).run())
    rounds = outcome.job.rounds
    # Main line: the prompt fix alone misses p95 (rolled back, kept as a branch), cache_aware alone does nothing.
    assert [(r.technique, r.line, r.decision.verdict) for r in rounds[1:]] == [
        ("prompt_structure", None, Verdict.ROLLBACK), ("router_policy", None, Verdict.ROLLBACK),
        ("router_policy", 1, Verdict.ACCEPT)]
    # The branch from round 1 tries cache_aware on the fixed prompt: 3000 tok/s at p95 500 ms.
    assert rounds[3].base == 1 and outcome.report.path == [0, 1, 3] and outcome.report.branches == [1]
    server = outcome.final.deployment.groups[0].server
    assert server.chunked_prefill_size == 4096 and outcome.final.deployment.router.policy == "cache_aware"
    assert outcome.job.state is JobState.SUCCEEDED and outcome.slo_met
    assert outcome.accepted == ["prompt_structure", "router_policy"]
    assert "branch started at round 1" in outcome.report.headline[1]
    started = [e for e in journal.events if e.kind == "branch_started"]
    assert [(e.round_index, e.technique) for e in started] == [(1, "prompt_structure")]
    markdown = render_markdown(outcome.report)
    assert "router cache_aware (branch from round 1)" in markdown
    assert "Reached by: round 0 (starting point) -> round 1 (prompt re-ordered) -> round 3 (router cache_aware)." \
        in markdown


def test_a_beam_of_width_one_walks_the_main_line_only() -> None:
    outcome = asyncio.run(_engine(FakeRunner(figures), width=1).run())
    assert [r.line for r in outcome.job.rounds] == [None, None, None]
    assert outcome.final.deployment.groups[0].server.chunked_prefill_size is None
    assert outcome.report.path == [0] and outcome.report.branches == []


def test_a_job_resumed_mid_branch_rebuilds_its_lines_and_measures_only_the_interrupted_round() -> None:
    whole = MemoryJournal()
    uninterrupted = asyncio.run(_engine(FakeRunner(figures), journal=whole).run())
    # A crash while the branch's first round was running.
    cut = whole.entries.index(next(e for e in whole.entries if e.index == 3 and e.state is RoundState.RUNNING))
    kept = {e.index: msgspec.structs.replace(e) for e in whole.entries[:cut + 1]}
    history = [kept[i] for i in sorted(kept)]
    history[3].state = RoundState.INTERRUPTED
    runner = FakeRunner(figures)
    resumed = asyncio.run(_engine(runner).resume(history))
    assert [(s.deployment.groups[0].server.chunked_prefill_size, s.deployment.router.policy) for s, _ in runner.calls] \
        == [(4096, "cache_aware")]
    assert resumed.job.rounds[4].line == 1 and resumed.job.rounds[4].retry_of == 3
    assert resumed.final == uninterrupted.final and resumed.report.path == [0, 1, 4]
    assert resumed.job.state is JobState.SUCCEEDED
