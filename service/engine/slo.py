"""SLO assessment of a round, for the report: each target, the measured figure, met or not."""

from __future__ import annotations

from collections.abc import Callable
from statistics import fmean
from typing import Any

import msgspec

from service.domain import SLO, RoundResult, SLOCheck

# (SLO field, how to read the figure, unit, True when the figure must stay at or below the target)
_TARGETS: list[tuple[str, Callable[[RoundResult], float | None], str, bool]] = [
    ("failure_rate_max", lambda r: r.failure_rate, "", True),
    ("ttft_p95_ms", lambda r: r.bench.p95_ttft_ms, "ms", True),
    ("ttft_p99_ms", lambda r: r.bench.p99_ttft_ms, "ms", True),
    ("ttft_median_ms", lambda r: r.bench.median_ttft_ms, "ms", True),
    ("itl_median_ms", lambda r: r.bench.median_itl_ms, "ms", True),
    ("itl_p99_ms", lambda r: r.bench.p99_itl_ms, "ms", True),
    ("e2e_p95_ms", lambda r: r.bench.p95_e2e_latency_ms, "ms", True),
    ("min_request_throughput", lambda r: r.bench.request_throughput, "req/s", False),
    ("min_output_throughput", lambda r: r.bench.output_throughput, "tok/s", False),
    ("cost_per_1m_output_max", lambda r: r.cost_per_1m_output_tokens, "$", True),
]


def completion_hours(result: RoundResult, slo: SLO) -> float | None:
    """Hours to generate the deadline's output tokens at this round's output throughput (casebook case 3)."""
    if slo.deadline_output_tokens is None or result.bench.output_throughput <= 0:
        return None
    return slo.deadline_output_tokens / result.bench.output_throughput / 3600.0


def slo_checks(results: list[RoundResult], slo: SLO) -> list[SLOCheck]:
    """Every set SLO target against the mean over a round's repeats; a missing figure is not met."""
    checks: list[SLOCheck] = []
    for name, read, _unit, at_most in _TARGETS:
        target = getattr(slo, name)
        if target is None:
            continue
        values = [v for v in (read(r) for r in results) if v is not None]
        actual = fmean(values) if values else None
        met = actual is not None and (actual <= target if at_most else actual >= target)
        checks.append(SLOCheck(name=name, target=float(target), actual=actual, met=met))
    if slo.deadline_hours is not None:
        hours = [h for h in (completion_hours(r, slo) for r in results) if h is not None]
        actual = fmean(hours) if hours else None
        checks.append(SLOCheck(name="deadline_hours", target=slo.deadline_hours, actual=actual,
                               met=actual is not None and actual <= slo.deadline_hours))
    return checks


def policy_slo_checks(policy: Any, results: list[RoundResult], slo: SLO) -> list[SLOCheck]:
    """The policy's own `slo_checks(result, slo)` when it has one (so report and decision agree), else ours."""
    own = getattr(policy, "slo_checks", None)
    if own is None or not results:
        return slo_checks(results, slo)
    try:
        raw = msgspec.to_builtins(own(results[0], slo)) if len(results) == 1 else None
        if raw is not None:
            return [_from_policy(item) for item in raw]
    except (TypeError, ValueError, msgspec.ValidationError, KeyError):
        pass
    return slo_checks(results, slo)


def _from_policy(item: dict[str, Any]) -> SLOCheck:
    return SLOCheck(name=str(item["name"]), target=float(item["target"]),
                    actual=None if item.get("actual") is None else float(item["actual"]),
                    met=bool(item["met"]))


UNITS: dict[str, str] = {name: unit for name, _, unit, _ in _TARGETS} | {"deadline_hours": "h"}
