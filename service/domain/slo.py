"""Service level objectives and what to optimise within them."""

from __future__ import annotations

from typing import Literal

import msgspec

ObjectiveKind = Literal["latency", "throughput", "deadline", "cost", "failure_rate", "goodput"]


class SLO(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Targets a round must meet; unset targets are not checked."""

    ttft_p95_ms: float | None = None
    ttft_p99_ms: float | None = None
    ttft_median_ms: float | None = None
    itl_median_ms: float | None = None
    itl_p99_ms: float | None = None
    e2e_p95_ms: float | None = None
    failure_rate_max: float | None = None
    min_request_throughput: float | None = None
    min_output_throughput: float | None = None
    deadline_hours: float | None = None
    deadline_output_tokens: float | None = None
    cost_per_1m_output_max: float | None = None


class Objective(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What to maximise once the SLO holds (casebook: latency, throughput, deadline, cost, failure rate).

    `goodput` maximises the requests per second that meet the SLO's per-request bounds (`goodput_slos`);
    with `[bench.max_load]`, that is the goodput at the highest load the SLO holds.
    """

    kind: ObjectiveKind = "throughput"
    target: float | None = None


# bench_serving's `--goodput` keys (`benchmark/goodput.py`): per-request bounds in milliseconds.
GOODPUT_METRICS = ("ttft", "tpot", "e2el")


def goodput_slos(slo: SLO) -> dict[str, float]:
    """The SLO's latency targets as bench_serving's `--goodput` per-request bounds (ms); empty when none is set.

    A percentile target bounds the requests under it, so the tail one set is the bound no request may
    exceed: TTFT p99, else p95, else median; TPOT the ITL p99 target, else the ITL median; e2e its p95.
    """
    bounds: dict[str, float] = {}
    ttft = next((t for t in (slo.ttft_p99_ms, slo.ttft_p95_ms, slo.ttft_median_ms) if t is not None), None)
    tpot = slo.itl_p99_ms if slo.itl_p99_ms is not None else slo.itl_median_ms
    for key, bound in (("ttft", ttft), ("tpot", tpot), ("e2el", slo.e2e_p95_ms)):
        if bound is not None:
            bounds[key] = float(bound)
    return bounds


def goodput(bounds: dict[str, float], requests: list[tuple[float, float, float]], sent: int,
            duration_s: float, scale: float = 1.0) -> tuple[float, float]:
    """(request goodput in req/s, SLO attainment) as bench_serving computes them.

    Args:
        bounds: `goodput_slos` of the SLO (ms).
        requests: (TTFT, TPOT, e2e) in ms of every successful request; TPOT 0 for a one-token output.
        sent: Requests sent, failed ones included (attainment's denominator).
        duration_s: The measured phase's length.
        scale: Requests each simulated one stands for (representative replicas).
    """
    good = sum(1 for ttft, tpot, e2e in requests
               if all(value <= bounds[key] for key, value in (("ttft", ttft), ("tpot", tpot), ("e2el", e2e))
                      if key in bounds))
    return good * scale / max(duration_s, 1e-9), good / sent if sent else 0.0
