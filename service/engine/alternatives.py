"""Judging a technique's alternatives the way the casebook does: each against the same accepted baseline.

Casebook case 2 round 1 measures round-robin and cache_aware each against the single TP4 instance; case 5
round 4 tabulates the prefill/decode splits side by side. Every alternative the policy keeps is a valid
next step, and the one best on the objective (after meeting the most SLO targets) becomes the new
baseline; the others are recorded as rolled back, with the figure that ranked them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import msgspec

from service.domain import (
    SLO,
    ConfigDelta,
    Decision,
    Objective,
    Round,
    RoundResult,
    Scenario,
    Verdict,
    completion_hours,
)
from service.engine.measure import mean_result
from service.engine.quality import QualityVerdict
from service.engine.slo import slo_checks


def simpler_when_same(delta: ConfigDelta, decision: Decision) -> Decision:
    """A change that only turns a feature off, measured the same as the baseline, is kept: the same figures from a
    simpler deployment (casebook: HiCache where nothing is evicted is "unnecessary"; the host memory it pins and
    the draft model speculation loads buy nothing). Any other decision stands."""
    if not (delta.simplifies and decision.same_as_baseline and decision.verdict is Verdict.ROLLBACK):
        return decision
    why = (f"{delta.summary}: measured the same as the baseline (every figure within noise, every SLO target it met "
           "still met), so the simpler deployment is kept")
    reading = f"the policy's reading of the figures: {decision.reasons[0]}" if decision.reasons else ""
    return msgspec.structs.replace(decision, verdict=Verdict.ACCEPT,
                                   reasons=[why, *([reading] if reading else []), *decision.reasons[1:]])


@dataclass
class Vetted:
    """A proposal checked before any GPU time: its candidate, why it is closed unmeasured, its quality gate."""

    candidate: Scenario | None
    closed: tuple[Verdict, str] | None = None
    gate: QualityVerdict | None = None


@dataclass
class Trial:
    """One alternative of a group: its round, candidate scenario, results and the policy's decision."""

    round_: Round
    delta: ConfigDelta
    candidate: Scenario
    results: list[RoundResult]
    decision: Decision


def objective_figure(objective: Objective, slo: SLO, results: list[RoundResult]) -> tuple[str, float, bool]:
    """(label, value, higher is better) of the figure the objective optimises, averaged over repeats.

    Latency is judged on p99 TTFT (the tail the casebook's latency rounds cut), throughput and deadline
    on output tokens per second, cost on cost per 1M output tokens (output throughput when the runner
    reports no cost), failure rate on the failure rate, goodput on requests per second within the SLO's
    per-request bounds (output throughput when the round has no goodput).
    """
    mean = mean_result(results)
    kind = objective.kind
    if kind == "latency":
        return "p99 TTFT (ms)", mean.bench.p99_ttft_ms, False
    if kind == "cost" and mean.cost_per_1m_output_tokens is not None:
        return "cost per 1M output tokens ($)", mean.cost_per_1m_output_tokens, False
    if kind == "failure_rate":
        return "failure rate", mean.failure_rate, False
    if kind == "goodput" and mean.bench.request_goodput is not None:
        return "goodput (req/s)", mean.bench.request_goodput, True
    if kind == "deadline":
        hours = completion_hours(mean, slo)
        if hours is not None:
            return "completion (h)", hours, False
    return "output tok/s", mean.bench.output_throughput, True


def objective_key(objective: Objective, slo: SLO, results: list[RoundResult]) -> float:
    """The objective figure as a sort key, smaller is better; a figure that is missing ranks last."""
    _, value, higher = objective_figure(objective, slo, results)
    if not math.isfinite(value) or (value <= 0 and not higher and objective.kind != "failure_rate"):
        value = math.inf if not higher else 0.0
    return -value if higher else value


def rank_key(trial: Trial, slo: SLO, objective: Objective) -> tuple[int, float, float]:
    """Sort key, smaller is better: SLO targets missed, then the objective figure, then output throughput."""
    missed = sum(1 for check in slo_checks(trial.results, slo) if not check.met)
    return missed, objective_key(objective, slo, trial.results), -mean_result(trial.results).bench.output_throughput


def pick_winner(trials: list[Trial], slo: SLO, objective: Objective, policy: Any | None = None) -> Trial | None:
    """The kept alternative that ranks best; ties go to the one proposed first.

    Alternatives are taken in the order they were proposed. A later one that meets more SLO targets wins;
    one that only ranks better on the objective wins when `policy`, judging it against the current best on
    the seeds both share, would keep it: an edge inside the noise leaves the earlier proposal in place, so
    the traffic seed does not pick between two equivalent alternatives.
    """
    kept = [t for t in trials if t.decision.verdict.keeps_candidate()]
    if not kept:
        return None
    best = kept[0]
    for trial in kept[1:]:
        mine, theirs = rank_key(trial, slo, objective), rank_key(best, slo, objective)
        if mine[0] < theirs[0] or (mine[0] == theirs[0] and mine < theirs
                                   and beats(trial.results, best.results, slo, objective, policy)):
            best = trial
    return best


def beats(results: list[RoundResult], against: list[RoundResult], slo: SLO, objective: Objective,
          policy: Any | None) -> bool:
    """Whether the policy keeps `results` judged against `against` on their shared seeds (True without one)."""
    if policy is None:
        return True
    shared = min(len(results), len(against))
    try:
        decision = policy.decide(against[:shared], results[:shared], slo, objective)
    except Exception:  # a policy that cannot compare two alternatives leaves the ranking to the figures
        return True
    return bool(decision.verdict.keeps_candidate())


def superseded(trial: Trial, winner: Trial, slo: SLO, objective: Objective) -> Decision:
    """The losing alternative's decision: rolled back in favour of the winner, the policy's reasons kept."""
    label, mine, _ = objective_figure(objective, slo, trial.results)
    _, theirs, _ = objective_figure(objective, slo, winner.results)
    if rank_key(trial, slo, objective) < rank_key(winner, slo, objective):
        why = (f"ranks better on the figures ({label} {mine:.4g} vs {theirs:.4g}) but not beyond noise, so the "
               f"alternative proposed first, `{winner.delta.summary}`, is kept")
    else:
        why = f"the alternative `{winner.delta.summary}` ranks better against the same baseline ({label} {theirs:.4g} vs {mine:.4g})"
    sentence = f"not adopted: {why}; the policy's own verdict was {trial.decision.verdict.value}"
    figures = {**trial.decision.figures, "objective_figure": mine, "winner_objective_figure": theirs}
    return Decision(verdict=Verdict.ROLLBACK, pattern=trial.decision.pattern, policy=trial.decision.policy,
                    reasons=[sentence, *trial.decision.reasons], figures=figures,
                    slo_checks=trial.decision.slo_checks, baseline_slo_checks=trial.decision.baseline_slo_checks)
