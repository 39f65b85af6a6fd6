"""The SLO gate: never accept a round that breaks an SLO the baseline met; prefer one that meets an SLO
the baseline missed; the failure-rate SLO comes first.

Failure rate outranks latency because failures compound and latency does not (casebook, Structured
Output API: with 20 chained tool calls a 1% failure rate fails one task in five, while TTFT 800 -> 900 ms
only makes the user wait a little longer).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from policies.changes import LATENCY, TAIL, THROUGHPUT, Comparison, MetricChange, MetricSpec, minimum_effect
from service import (
    LATENCY_TARGETS,
    SLO,
    SLO_TARGETS,
    RoundResult,
    SLOCheck,
    completion_hours,
    mean_result,
    slo_checks,
)

__all__ = ["LATENCY_TARGETS", "NAMED_FIGURES", "TTFT_TARGETS", "averaged", "completion_hours", "gate", "has_latency_slo",
           "moved_closer", "slo_checks", "target_change"]


def averaged(results: Sequence[RoundResult]) -> RoundResult:
    """One round whose figures are the mean of the repeats' (what the means and rates are judged by;
    percentile targets are judged on the pooled requests, `policies.slo_interval`)."""
    return mean_result(list(results))


def moved_closer(check: SLOCheck, before: SLOCheck | None) -> bool:
    """Whether the candidate's actual for a target moved toward it from the baseline's actual.

    Fails closed: a figure either side lacks never counts as closer.
    """
    if before is None or before.actual is None or check.actual is None:
        return False
    lower_is_better = SLO_TARGETS[check.name][1]
    return check.actual < before.actual if lower_is_better else check.actual > before.actual


# SLO target -> the pattern figures that stand for it (p95/p99 TTFT targets -> p99 TTFT: the TTFT tail the
# bench reports; an E2E target is TTFT plus the decode time, so both count).
NAMED_FIGURES: dict[str, tuple[str, ...]] = {
    "ttft_p95_ms": ("p99_ttft_ms",),
    "ttft_p99_ms": ("p99_ttft_ms",),
    "ttft_median_ms": ("median_ttft_ms",),
    "itl_median_ms": ("median_itl_ms",),
    "itl_p99_ms": ("p99_itl_ms",),
    "e2e_p95_ms": ("p99_ttft_ms", "median_itl_ms"),
}

TTFT_TARGETS = ("ttft_p95_ms", "ttft_p99_ms", "ttft_median_ms")


def has_latency_slo(slo: SLO) -> bool:
    """Whether any latency target is set (the casebook keeps stability trade-offs only then)."""
    return any(getattr(slo, name) is not None for name in LATENCY_TARGETS)


class GateOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What the SLO gate found: targets the candidate newly breaks, and newly meets with proof."""

    broken: list[SLOCheck]
    newly_met: list[SLOCheck]
    evidence: dict[str, MetricChange]

    def breaks(self, name: str) -> bool:
        """Whether the candidate breaks this target the baseline met."""
        return any(c.name == name for c in self.broken)

    def meets(self, name: str) -> bool:
        """Whether the candidate meets this target the baseline missed, beyond noise."""
        return any(c.name == name for c in self.newly_met)


_NOISE_OF: dict[str, MetricSpec] = {
    "ttft_p95_ms": MetricSpec(key="p95_ttft_ms", label="p95 TTFT", unit="ms", group="tail",
                              higher_is_better=False, sample=("ttft_ms", 0.95)),
    "ttft_p99_ms": TAIL[0],
    "ttft_median_ms": LATENCY[0],
    "itl_median_ms": LATENCY[1],
    "itl_p99_ms": TAIL[1],
    "e2e_p95_ms": MetricSpec(key="p95_e2e_latency_ms", label="p95 E2E latency", unit="ms", group="tail",
                             higher_is_better=False, sample=("e2e_ms", 0.95)),
    "min_request_throughput": THROUGHPUT[1],
    "min_output_throughput": THROUGHPUT[0],
}


def gate(comparison: Comparison, slo: SLO, base: list[SLOCheck], cand: list[SLOCheck],
         failure: MetricChange, alpha: float, *, proven: bool = False) -> GateOutcome:
    """Compare the two sides' SLO checks.

    A target counts as newly met only when the metric behind it improved significantly (p < `alpha`),
    so a baseline sitting on the target cannot be "fixed" by noise; a target counts as broken on the
    point estimate (the pooled percentile), because the gate fails closed; a percentile within noise of
    its target makes the decision unsettled instead (`policies.evaluation.reread`).

    `proven` reads the gate as more seeds could leave it: an improvement large enough to count (its
    minimum effect) but not yet significant is read as proven. A failure rate of 5 in 120 against 0 in 120
    (p = 0.06 before Holm's correction) is not proof, and 15 in 360 against 0 in 360 is.
    """
    base_met = {c.name: c.met for c in base}
    broken = [c for c in cand if base_met.get(c.name) and not c.met]
    evidence: dict[str, MetricChange] = {}
    newly_met = []
    for check in cand:
        if base_met.get(check.name) or not check.met:
            continue
        change = failure if check.name == "failure_rate_max" else target_change(comparison, slo, check, base)
        if change is None:
            continue
        evidence[check.name] = change
        if change.p_value is not None and change.improves and (
                change.p_value < alpha or (proven and abs(change.change) >= minimum_effect(change.spec, comparison.settings))):
            newly_met.append(check)
    return GateOutcome(broken=broken, newly_met=newly_met, evidence=evidence)


def target_change(comparison: Comparison, slo: SLO, check: SLOCheck, base: list[SLOCheck]) -> MetricChange | None:
    if check.name in _NOISE_OF:
        return comparison.raw(_NOISE_OF[check.name])
    # Hours and cost per token are inversely proportional to output throughput: they share its noise.
    before = next((c.actual for c in base if c.name == check.name), None)
    if before is None or check.actual is None:
        return None
    spec = MetricSpec(key="output_throughput", label=check.name.replace("_", " "), unit="",
                      group="throughput", higher_is_better=False, sample="output_rate")
    return comparison.raw(spec, values=(before, check.actual))
