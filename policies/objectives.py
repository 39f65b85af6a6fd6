"""Objectives: what a policy maximises once the SLO holds, and how each pattern turns into a verdict.

Kinds (service.SLO's Objective): `latency` prefers a lower tail (p99 TTFT) within the SLO, `throughput`
maximises output tokens per second, `deadline` minimises completion hours, `cost` minimises cost per 1M
output tokens, `failure_rate` minimises failures. Failure rate comes first whatever the objective
(casebook, Structured Output API).
"""

from __future__ import annotations

import msgspec

from policies.changes import THROUGHPUT, Comparison, Direction, MetricChange, judge
from policies.slo_gate import averaged, completion_hours, has_latency_slo
from service import SLO, Objective, Pattern, SLOCheck, Verdict


def objective_change(objective: Objective, comparison: Comparison, changes: list[MetricChange],
                     slo: SLO) -> MetricChange | None:
    """The change of the figure the objective optimises, judged on its own (None when not reported)."""
    by_key = {c.spec.key: c for c in changes}
    if objective.kind == "latency":
        return by_key["p99_ttft_ms"]
    if objective.kind == "failure_rate":
        return by_key["failure_rate"]
    if objective.kind == "throughput":
        return by_key["output_throughput"]
    base, cand = averaged(comparison.baseline.results), averaged(comparison.candidate.results)
    if objective.kind == "deadline":
        values = (completion_hours(base, slo), completion_hours(cand, slo))
        label, unit = "completion time", "h"
    else:
        values = (base.cost_per_1m_output_tokens, cand.cost_per_1m_output_tokens)
        label, unit = "cost per 1M output tokens", "$"
    if values[0] is None or values[1] is None:
        return by_key["output_throughput"] if objective.kind == "deadline" else None
    # Hours and cost per token scale with 1 / output throughput: they carry its relative noise.
    spec = msgspec.structs.replace(THROUGHPUT[0], label=label, unit=unit, higher_is_better=False,
                                   key="output_throughput")
    change = comparison.raw(spec, values=(values[0], values[1]))
    return judge([change], comparison.settings)[0]


def pattern_verdict(pattern: Pattern, changes: list[MetricChange], slo: SLO, objective: Objective,
                    cand_checks: list[SLOCheck]) -> tuple[Verdict, str]:
    """The casebook's next action for a pattern, as a verdict and the phrase that explains it."""
    if pattern is Pattern.THROUGHPUT_UP_LATENCY_DOWN:
        return Verdict.ACCEPT, "accepted"
    if pattern is Pattern.MEDIAN_FLAT_P99_DOWN:
        return Verdict.ACCEPT, "accepted"
    if pattern is Pattern.THROUGHPUT_UP_LATENCY_UP:
        return _batch_effect(changes, objective, cand_checks)
    if pattern is Pattern.THROUGHPUT_DOWN_TAIL_DOWN:
        if has_latency_slo(slo) or objective.kind == "latency":
            return Verdict.KEEP_TRADEOFF, "kept for the latency SLO"
        return Verdict.ROLLBACK, "rolled back: no latency SLO pays for the lost throughput"
    if pattern is Pattern.THROUGHPUT_DOWN_LATENCY_UP:
        return Verdict.ROLLBACK, "rolled back"
    return Verdict.ROLLBACK, "baseline kept"


def _batch_effect(changes: list[MetricChange], objective: Objective,
                  cand_checks: list[SLOCheck]) -> tuple[Verdict, str]:
    # Casebook: "Throughput up, latency up: maintain if the SLO has headroom."
    missed = [c.name for c in cand_checks if not c.met]
    if missed:
        return Verdict.ROLLBACK, f"rolled back: no SLO headroom ({', '.join(missed)} missed)"
    p99_ttft = next(c for c in changes if c.spec.key == "p99_ttft_ms")
    if objective.kind == "latency" and p99_ttft.direction is Direction.WORSE:
        return Verdict.ROLLBACK, "rolled back: the latency objective prefers the lower p99 TTFT"
    return Verdict.KEEP_TRADEOFF, "kept within SLO headroom"


def objective_override(verdict: Verdict, objective: Objective,
                       change: MetricChange | None) -> tuple[Verdict, str] | None:
    """A verdict the cost objective imposes over the pattern's, with its phrase; None when it agrees.

    A cheaper configuration that holds the SLO is what the cost objective asks for, even when throughput
    falls (fewer GPUs); a dearer one is rolled back even when throughput rises.
    """
    if objective.kind != "cost" or change is None:
        return None
    if change.direction is Direction.BETTER and not verdict.keeps_candidate():
        return Verdict.ACCEPT, "accepted: the cost objective comes first within the SLO"
    if change.direction is Direction.WORSE and verdict.keeps_candidate():
        return Verdict.ROLLBACK, "rolled back: the cost objective comes first"
    return None


def failure_verdict(failure: MetricChange) -> tuple[Verdict, str] | None:
    """Failure rate first: a proven rise rolls back, a proven drop keeps, whatever latency did."""
    if failure.direction is Direction.WORSE:
        return Verdict.ROLLBACK, "rolled back: failure rate comes first"
    if failure.direction is Direction.BETTER:
        return Verdict.ACCEPT, "accepted: failure rate takes precedence over latency"
    return None
