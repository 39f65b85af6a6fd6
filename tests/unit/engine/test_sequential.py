"""Sequential testing: an undecided round gets more seeds on both sides, paired seed for seed, within limits."""

from __future__ import annotations

import asyncio
from typing import ClassVar

from service import SLO, Decision, Objective, Pattern, Playbook, Policy, RoundResult, RoundStatus, Verdict
from service.engine import MAX_REPEAT_FACTOR, EngineParts, TuningEngine, TuningOutcome
from tests.unit.engine.fakes import FakeRunner, SweepTechnique, chunk_figures, model_spec, scenario


class UndecidedUntil(Policy):
    """Inconclusive (or kept but unsettled) until each side has `needed` repeats, then the 4096 chunk wins."""

    name: ClassVar[str] = "undecided"

    def __init__(self, needed: int, *, unsettled: bool = False) -> None:
        self.needed = needed
        self.unsettled = unsettled
        self.seen: list[tuple[list[int | None], list[int | None]]] = []

    def decide(self, baseline: list[RoundResult], candidate: list[RoundResult], slo: SLO,
               objective: Objective) -> Decision:
        self.seen.append(([r.provenance.seed for r in baseline], [r.provenance.seed for r in candidate]))
        if any(r.status is not RoundStatus.OK for r in candidate):
            return Decision(verdict=Verdict.ERROR, pattern=Pattern.NOT_APPLICABLE, reasons=["failed"])
        if len(candidate) < self.needed:
            if self.unsettled:
                return Decision(verdict=Verdict.KEEP_TRADEOFF, pattern=Pattern.THROUGHPUT_DOWN_TAIL_DOWN,
                                reasons=["kept, but the throughput loss may be noise"], unsettled=True)
            return Decision(verdict=Verdict.INCONCLUSIVE, pattern=Pattern.NOTHING_CHANGED, reasons=["not yet"])
        won = candidate[0].bench.p99_ttft_ms < baseline[0].bench.p99_ttft_ms * 0.9
        return Decision(verdict=Verdict.KEEP_TRADEOFF if won else Verdict.ROLLBACK,
                        pattern=Pattern.THROUGHPUT_DOWN_TAIL_DOWN, reasons=["decided"])


def run(policy: Policy, runner: FakeRunner, repeats: int = 3, max_rounds: int = 10) -> TuningOutcome:
    parts = EngineParts(techniques={"sweep": SweepTechnique([4096])}, runner=runner, policy=policy,
                        resolve=model_spec)
    playbook = Playbook(name="p", techniques=["sweep"], repeats=repeats, max_rounds=max_rounds)
    return asyncio.run(TuningEngine(parts, playbook, scenario(), seed=10).run())


def test_an_inconclusive_round_is_measured_on_more_seeds_and_decided_on_all_of_them() -> None:
    policy, runner = UndecidedUntil(6), FakeRunner(chunk_figures)
    outcome = run(policy, runner)
    candidate = outcome.job.rounds[1]
    assert candidate.decision.verdict is Verdict.KEEP_TRADEOFF
    assert [r.provenance.seed for r in candidate.results] == [10, 11, 12, 13, 14, 15]
    assert candidate.decision.reasons[-1] == "decided on 6 seeds per side: 3 left it to noise"
    # The baseline gained the same three seeds, so every comparison stayed paired seed for seed.
    assert policy.seen == [([10, 11, 12], [10, 11, 12]), ([10, 11, 12, 13, 14, 15], [10, 11, 12, 13, 14, 15])]
    assert [seed for _, seed in runner.calls] == [10, 11, 12, 10, 11, 12, 13, 14, 15, 13, 14, 15]
    assert outcome.final.deployment.groups[0].server.chunked_prefill_size == 4096


def test_a_kept_but_unsettled_round_is_measured_again_too() -> None:
    outcome = run(UndecidedUntil(6, unsettled=True), FakeRunner(chunk_figures))
    assert len(outcome.job.rounds[1].results) == 6
    assert outcome.job.rounds[1].decision.reasons == ["decided", "decided on 6 seeds per side: 3 left it to noise"]


def test_extension_stops_at_twice_the_repeats_and_the_baseline_is_kept() -> None:
    policy = UndecidedUntil(100)
    outcome = run(policy, FakeRunner(chunk_figures), repeats=2)
    candidate = outcome.job.rounds[1]
    assert len(candidate.results) == 2 * MAX_REPEAT_FACTOR
    assert candidate.decision.verdict is Verdict.INCONCLUSIVE
    assert outcome.final == outcome.initial


def test_a_one_repeat_playbook_extends_to_five_seeds_where_a_paired_t_has_the_power_to_decide() -> None:
    # Three times one repeat is three seeds: a paired t over them has 2 degrees of freedom, too few to reach
    # the policy's level. The extension goes on, one seed at a time, to five.
    policy = UndecidedUntil(100)
    outcome = run(policy, FakeRunner(chunk_figures), repeats=1)
    candidate = outcome.job.rounds[1]
    assert [r.provenance.seed for r in candidate.results] == [10, 11, 12, 13, 14]
    assert [len(c) for _, c in policy.seen] == [1, 2, 3, 4, 5]
    assert candidate.decision.verdict is Verdict.INCONCLUSIVE
    assert candidate.decision.reasons[-1] == "decided on 5 seeds per side: 1 left it to noise"
    settled = run(UndecidedUntil(4), FakeRunner(chunk_figures), repeats=1)
    assert len(settled.job.rounds[1].results) == 4


def test_a_failed_extra_repeat_is_an_error_never_accepted() -> None:
    # Baseline 3 + candidate 3 + the baseline's 3 extra seeds succeed; the candidate's extra repeat fails.
    outcome = run(UndecidedUntil(6), FakeRunner(chunk_figures, fail_after=9))
    assert outcome.job.rounds[1].decision.verdict is Verdict.ERROR
    assert outcome.final == outcome.initial


def test_a_failed_extra_baseline_repeat_leaves_the_round_undecided() -> None:
    # The baseline's first extra seed fails: nothing is compared on unpaired seeds, the baseline is kept.
    outcome = run(UndecidedUntil(6), FakeRunner(chunk_figures, fail_after=6))
    candidate = outcome.job.rounds[1]
    assert len(candidate.results) == 3 and candidate.decision.verdict is Verdict.INCONCLUSIVE
    assert outcome.final == outcome.initial
