"""SLO assessment of one round: each set target, the measured figure, met or not.

One definition serves the decision policies (through the `service` facade) and the engine's reports, so
a decision and the report that quotes it never disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from statistics import fmean
from typing import TypeVar

import msgspec

from service.domain.bench import BenchFigures, RoundResult, ServerMetrics
from service.domain.slo import SLO
from service.domain.tuning import SLOCheck

SECONDS_PER_HOUR = 3600.0
_Figures = TypeVar("_Figures", BenchFigures, ServerMetrics)


def completion_hours(result: RoundResult, slo: SLO) -> float | None:
    """Hours to generate the SLO's `deadline_output_tokens` at the round's output throughput (casebook case 3)."""
    if slo.deadline_output_tokens is None or result.bench.output_throughput <= 0:
        return None
    return slo.deadline_output_tokens / result.bench.output_throughput / SECONDS_PER_HOUR


def _latency(key: str) -> Callable[[RoundResult, SLO], float | None]:
    # A latency of 0 means "not reported", and an unreported latency never meets a target.
    return lambda r, _slo: (getattr(r.bench, key) or None)


# SLO field -> (how to read the actual from a round, whether lower is better, unit). Failure rate first.
SLO_TARGETS: dict[str, tuple[Callable[[RoundResult, SLO], float | None], bool, str]] = {
    "failure_rate_max": (lambda r, _slo: r.failure_rate, True, ""),
    "ttft_p95_ms": (_latency("p95_ttft_ms"), True, "ms"),
    "ttft_p99_ms": (_latency("p99_ttft_ms"), True, "ms"),
    "ttft_median_ms": (_latency("median_ttft_ms"), True, "ms"),
    "itl_median_ms": (_latency("median_itl_ms"), True, "ms"),
    "itl_p99_ms": (_latency("p99_itl_ms"), True, "ms"),
    "e2e_p95_ms": (_latency("p95_e2e_latency_ms"), True, "ms"),
    "min_request_throughput": (lambda r, _slo: r.bench.request_throughput, False, "req/s"),
    "min_output_throughput": (lambda r, _slo: r.bench.output_throughput, False, "tok/s"),
    "deadline_hours": (completion_hours, True, "h"),
    "cost_per_1m_output_max": (lambda r, _slo: r.cost_per_1m_output_tokens, True, "$"),
}

LATENCY_TARGETS = ("ttft_p95_ms", "ttft_p99_ms", "ttft_median_ms", "itl_median_ms", "itl_p99_ms", "e2e_p95_ms")

SLO_UNITS: dict[str, str] = {name: unit for name, (_, _, unit) in SLO_TARGETS.items()}


def slo_checks(result: RoundResult, slo: SLO) -> list[SLOCheck]:
    """Every SLO target that is set, checked against one round (failure rate first).

    Args:
        result: The round (for repeats, the mean over them).
        slo: The targets; unset targets are not checked.

    Returns:
        One check per set target: its name (the SLO field), target, actual (None when the round lacks the
        figure, which never meets the target) and whether it is met.
    """
    checks = []
    for name, (actual_of, lower_is_better, _unit) in SLO_TARGETS.items():
        target = getattr(slo, name)
        if target is None:
            continue
        raw = actual_of(result, slo)
        actual = None if raw is None else float(raw)
        met = actual is not None and (actual <= target if lower_is_better else actual >= target)
        checks.append(SLOCheck(name=name, target=float(target), actual=actual, met=met))
    return checks


def mean_result(results: list[RoundResult]) -> RoundResult:
    """One result whose bench and server figures are the means over the repeats (what SLOs, decisions and reports judge).

    The first repeat's status, provenance and per-request samples are kept; a figure a repeat did not
    report (None) is left out of its mean.
    """
    first = results[0]
    if len(results) == 1:
        return first
    bench = _mean_struct(first.bench, [r.bench for r in results])
    server = _mean_struct(first.server, [r.server for r in results])
    costs = [r.cost_per_1m_output_tokens for r in results if r.cost_per_1m_output_tokens is not None]
    imbalance = [r.expert_imbalance for r in results if r.expert_imbalance is not None]
    return msgspec.structs.replace(
        first, bench=bench, server=server, failure_rate=fmean(r.failure_rate for r in results),
        cost_per_1m_output_tokens=fmean(costs) if costs else None,
        expert_imbalance=fmean(imbalance) if imbalance else None)


def _mean_struct(first: _Figures, items: list[_Figures]) -> _Figures:
    changes: dict[str, object] = {}
    for name in first.__struct_fields__:
        values = [getattr(item, name) for item in items]
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if not numbers or len(numbers) != len([v for v in values if v is not None]):
            continue
        mean = fmean(numbers)
        changes[name] = round(mean) if isinstance(getattr(first, name), int) else mean
    return msgspec.structs.replace(first, **changes)
