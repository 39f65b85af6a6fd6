"""bench_serving's figures from request outcomes (`benchmark/serving.py` calculate_metrics).

`time_scale` converts wall seconds of an emulated run into emulated (GPU) seconds: times are divided by it
and rates multiplied, so an emulated round reads like the GPU round it stands for. It is 1 on real servers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from service.domain import SLO, BenchFigures, RequestSamples, goodput, goodput_slos
from service.loadgen.client import RequestOutcome


def _stats(values: Sequence[float], name: str, scale: float) -> dict[str, float]:
    """mean / median / p90 / p95 / p99 in milliseconds (np.percentile; empty lists give 0, as bench_serving)."""
    if not values:
        return {f"{k}_{name}_ms": 0.0 for k in ("mean", "median", "p90", "p95", "p99")}
    array = np.asarray(values, dtype=float) * 1000.0 / scale
    return {f"mean_{name}_ms": float(array.mean()), f"median_{name}_ms": float(np.median(array)),
            f"p90_{name}_ms": float(np.percentile(array, 90)), f"p95_{name}_ms": float(np.percentile(array, 95)),
            f"p99_{name}_ms": float(np.percentile(array, 99))}


def peak_concurrency(outcomes: Sequence[RequestOutcome]) -> int:
    """Most requests in flight at once."""
    events = sorted([(o.started, 1) for o in outcomes] + [(o.started + o.latency, -1) for o in outcomes])
    peak = current = 0
    for _, step in events:
        current += step
        peak = max(peak, current)
    return peak


def bench_figures(outcomes: Sequence[RequestOutcome], duration: float, *, time_scale: float = 1.0,
                  accept_length: float | None = None, slo: SLO | None = None) -> BenchFigures:
    """BenchFigures of the successful requests of one measured phase that took `duration` wall seconds.

    With an SLO that sets latency targets, goodput and SLO attainment as bench_serving's `--goodput` gives
    them for `goodput_slos(slo)` (the failed requests count as sent, never as good).
    """
    done = [o for o in outcomes if o.success]
    scale = max(time_scale, 1e-9)
    seconds = max(duration / scale, 1e-9)
    inputs = sum(o.prompt_tokens for o in done)
    outputs = sum(o.output_tokens for o in done)
    itls = [gap for o in done for gap in o.itl]
    tpots = [(o.latency - o.ttft) / (o.output_tokens - 1) for o in done if o.output_tokens > 1]
    figures = {
        **_stats([o.latency for o in done], "e2e_latency", scale), **_stats([o.ttft for o in done], "ttft", scale),
        **_stats(tpots, "tpot", scale), **_stats(itls, "itl", scale),
    }
    bounds = goodput_slos(slo) if slo is not None else {}
    good = goodput(bounds, [(o.ttft * 1000.0 / scale, _tpot(o) * 1000.0 / scale, o.latency * 1000.0 / scale)
                            for o in done], len(outcomes), seconds) if bounds else None
    return BenchFigures(
        request_goodput=good[0] if good else None, slo_attainment=good[1] if good else None,
        goodput_slos_ms=bounds or None, completed=len(done), duration=seconds, total_input_tokens=inputs, total_output_tokens=outputs,
        request_throughput=len(done) / seconds, input_throughput=inputs / seconds,
        output_throughput=outputs / seconds, total_throughput=(inputs + outputs) / seconds,
        max_itl_ms=max(itls, default=0.0) * 1000.0 / scale,
        concurrency=sum(o.latency for o in done) / scale / seconds, accept_length=accept_length,
        max_concurrent_requests=peak_concurrency(done), **figures)


def _tpot(outcome: RequestOutcome) -> float:
    """bench_serving's TPOT of one request (seconds); 0 for a one-token output (`benchmark/goodput.py`)."""
    if outcome.output_tokens <= 1:
        return 0.0
    return (outcome.latency - outcome.ttft) / (outcome.output_tokens - 1)


def request_samples(outcomes: Sequence[RequestOutcome], *, time_scale: float = 1.0) -> RequestSamples:
    """Per-request TTFT, end-to-end latency, TPOT (ms) and output lengths of the successful requests."""
    scale = max(time_scale, 1e-9)
    done = [o for o in outcomes if o.success]
    return RequestSamples(
        ttft_ms=[o.ttft * 1000.0 / scale for o in done], e2e_ms=[o.latency * 1000.0 / scale for o in done],
        tpot_ms=[(o.latency - o.ttft) * 1000.0 / scale / (o.output_tokens - 1) for o in done if o.output_tokens > 1],
        output_tokens=[o.output_tokens for o in done])


def json_failures(outcomes: Sequence[RequestOutcome]) -> dict[str, int]:
    """Completed requests whose output failed its JSON schema, by kind (`parse`, `enum`, ...), most first."""
    kinds: dict[str, int] = {}
    for o in outcomes:
        if o.success and o.invalid_json:
            kinds[o.invalid_json] = kinds.get(o.invalid_json, 0) + 1
    return dict(sorted(kinds.items(), key=lambda kv: -kv[1]))
