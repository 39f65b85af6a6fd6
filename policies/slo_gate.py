"""The SLO gate: never accept a round that breaks an SLO the baseline met; prefer one that meets an SLO
the baseline missed; the failure-rate SLO comes first.

Failure rate outranks latency because failures compound and latency does not (casebook, Structured
Output API: with 20 chained tool calls a 1% failure rate fails one task in five, while TTFT 800 -> 900 ms
only makes the user wait a little longer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec
import numpy as np

from policies.changes import LATENCY, TAIL, THROUGHPUT, Comparison, MetricChange, MetricSpec
from service import SLO, BenchFigures, RoundResult, SLOCheck

_SECONDS_PER_HOUR = 3600.0


def completion_hours(result: RoundResult, slo: SLO) -> float | None:
    """Hours to generate the SLO's `deadline_output_tokens` at the round's output throughput."""
    if slo.deadline_output_tokens is None or result.bench.output_throughput <= 0:
        return None
    return slo.deadline_output_tokens / result.bench.output_throughput / _SECONDS_PER_HOUR


def _latency(key: str) -> Callable[[RoundResult, SLO], float | None]:
    # A latency of 0 means "not reported", and an unreported latency never meets a target.
    return lambda r, _slo: (getattr(r.bench, key) or None)


# SLO field -> (how to read the actual from a round, whether lower is better). Failure rate first.
_TARGETS: dict[str, tuple[Callable[[RoundResult, SLO], float | None], bool]] = {
    "failure_rate_max": (lambda r, _slo: r.failure_rate, True),
    "ttft_p95_ms": (_latency("p95_ttft_ms"), True),
    "ttft_p99_ms": (_latency("p99_ttft_ms"), True),
    "ttft_median_ms": (_latency("median_ttft_ms"), True),
    "itl_median_ms": (_latency("median_itl_ms"), True),
    "itl_p99_ms": (_latency("p99_itl_ms"), True),
    "e2e_p95_ms": (_latency("p95_e2e_latency_ms"), True),
    "min_request_throughput": (lambda r, _slo: r.bench.request_throughput, False),
    "min_output_throughput": (lambda r, _slo: r.bench.output_throughput, False),
    "deadline_hours": (completion_hours, True),
    "cost_per_1m_output_max": (lambda r, _slo: r.cost_per_1m_output_tokens, True),
}

LATENCY_TARGETS = ("ttft_p95_ms", "ttft_p99_ms", "ttft_median_ms", "itl_median_ms", "itl_p99_ms", "e2e_p95_ms")


def slo_checks(result: RoundResult, slo: SLO) -> list[SLOCheck]:
    """Every SLO target that is set, checked against one round (failure rate first).

    Args:
        result: The round (for repeats, pass `averaged(results)`).
        slo: The targets; unset targets are not checked.

    Returns:
        One check per set target: its name (the SLO field), target, actual (None when the round lacks the
        figure, which never meets the target) and whether it is met.
    """
    checks = []
    for name, (actual_of, lower_is_better) in _TARGETS.items():
        target = getattr(slo, name)
        if target is None:
            continue
        raw = actual_of(result, slo)
        actual = None if raw is None else float(raw)
        met = actual is not None and (actual <= target if lower_is_better else actual >= target)
        checks.append(SLOCheck(name=name, target=float(target), actual=actual, met=met))
    return checks


def averaged(results: Sequence[RoundResult]) -> RoundResult:
    """One round whose figures are the mean of the repeats' (what the SLO is judged by)."""
    first = results[0]
    if len(results) == 1:
        return first
    bench: dict[str, float | int] = {}
    for field in BenchFigures.__struct_fields__:
        values = [getattr(r.bench, field) for r in results]
        if all(isinstance(v, int | float) for v in values):
            mean = float(np.mean(values))
            bench[field] = round(mean) if isinstance(getattr(first.bench, field), int) else mean
    costs = [r.cost_per_1m_output_tokens for r in results]
    return msgspec.structs.replace(
        first,
        bench=msgspec.structs.replace(first.bench, **bench),
        failure_rate=float(np.mean([r.failure_rate for r in results])),
        cost_per_1m_output_tokens=None if None in costs else float(np.mean(costs)),  # type: ignore[arg-type]
    )


def moved_closer(check: SLOCheck, before: SLOCheck | None) -> bool:
    """Whether the candidate's actual for a target moved toward it from the baseline's actual.

    Fails closed: a figure either side lacks never counts as closer.
    """
    if before is None or before.actual is None or check.actual is None:
        return False
    lower_is_better = _TARGETS[check.name][1]
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
         failure: MetricChange, alpha: float) -> GateOutcome:
    """Compare the two sides' SLO checks.

    A target counts as newly met only when the metric behind it improved significantly (p < `alpha`),
    so a baseline sitting on the target cannot be "fixed" by noise; a target counts as broken on the
    point estimate alone, because the gate fails closed.
    """
    base_met = {c.name: c.met for c in base}
    broken = [c for c in cand if base_met.get(c.name) and not c.met]
    evidence: dict[str, MetricChange] = {}
    newly_met = []
    for check in cand:
        if base_met.get(check.name) or not check.met:
            continue
        change = failure if check.name == "failure_rate_max" else _crossing(comparison, slo, check, base)
        if change is None:
            continue
        evidence[check.name] = change
        if change.p_value is not None and change.p_value < alpha and change.improves:
            newly_met.append(check)
    return GateOutcome(broken=broken, newly_met=newly_met, evidence=evidence)


def _crossing(comparison: Comparison, slo: SLO, check: SLOCheck, base: list[SLOCheck]) -> MetricChange | None:
    if check.name in _NOISE_OF:
        return comparison.raw(_NOISE_OF[check.name])
    # Hours and cost per token are inversely proportional to output throughput: they share its noise.
    before = next((c.actual for c in base if c.name == check.name), None)
    if before is None or check.actual is None:
        return None
    spec = MetricSpec(key="output_throughput", label=check.name.replace("_", " "), unit="",
                      group="throughput", higher_is_better=False, sample="output_rate")
    return comparison.raw(spec, values=(before, check.actual))
