"""Synthetic benchmark rounds from seeded random requests, shaped like the casebook's coding assistant.

Each request gets an output length, a TTFT (log-normal) and inter-token gaps (log-normal around its own
TPOT); the bench figures are computed from those samples the way `sglang.bench_serving` does, with the
duration of a closed loop at `concurrency` (Little's law). Knobs scale one mechanism at a time so a test
can inject a known change.
"""

from __future__ import annotations

import numpy as np

from service.domain import BenchFigures, Provenance, RequestSamples, RoundResult, RoundStatus, ServerMetrics, Source

__all__ = ["make_round"]


def make_round(
    seed: int,
    *,
    requests: int = 500,
    concurrency: int = 25,
    ttft_ms: float = 612.0,
    ttft_sigma: float = 0.85,
    tpot_ms: float = 28.4,
    output_tokens: int = 400,
    decode_speed: float = 1.0,
    ttft_scale: float = 1.0,
    tail_scale: float = 1.0,
    itl_tail_scale: float = 1.0,
    running_cap: int | None = None,
    failure_rate: float = 0.0,
    gpu_hour_price: float | None = None,
    with_samples: bool = True,
) -> RoundResult:
    """One round of `requests` requests.

    Args:
        seed: Seeds every draw; another seed differs by sampling noise only.
        requests: Requests measured (bench_serving --num-prompts).
        concurrency: Closed-loop concurrency used for the duration.
        ttft_ms: Median TTFT.
        ttft_sigma: Log-normal spread of TTFT (0.85 puts p99 near 7x the median, as the casebook's
            round 0: 4381 vs 612 ms).
        tpot_ms: Median time per output token.
        output_tokens: Mean output length (uniform +-10%).
        decode_speed: Multiplies decode speed (0.85 = 15% slower decode).
        ttft_scale: Multiplies every TTFT (queueing in front of the server).
        tail_scale: Multiplies how far the slowest 20% of TTFTs sit beyond p80 (long prefills
            blocking short ones; chunked prefill shrinks it).
        itl_tail_scale: Multiplies how far the slowest 10% of inter-token gaps sit beyond p90 (decode
            steps stalled by prefill insertion; smaller prefill chunks shrink it).
        running_cap: Server-side cap on running requests (--max-running-requests) below `concurrency`:
            the rest queue, so throughput falls to the cap's share and TTFT gains the queue wait.
        failure_rate: Fraction of requests that failed.
        gpu_hour_price: Price of the deployment per hour; sets cost per 1M output tokens.
        with_samples: Keep per-request samples (False: bench figures only).
    """
    rng = np.random.default_rng(seed)
    out = rng.integers(int(output_tokens * 0.9), int(output_tokens * 1.1) + 1, size=requests)
    ttft = np.exp(rng.normal(np.log(ttft_ms), ttft_sigma, size=requests)) * ttft_scale
    # The tail beyond p80 is requests stuck behind long prefills: scaling their excess keeps the order.
    knee = np.quantile(ttft, 0.8)
    ttft = np.where(ttft > knee, knee + (ttft - knee) * tail_scale, ttft)
    tpot = np.exp(rng.normal(np.log(tpot_ms / decode_speed), 0.15, size=requests))
    running = concurrency if running_cap is None else min(concurrency, running_cap)
    if running < concurrency:
        # Little's law: C requests in the system, `running` served; the rest wait ~ service * (C / running - 1).
        service = (ttft + tpot * (out - 1)).mean()
        ttft = ttft + rng.exponential(service * (concurrency / running - 1.0), size=requests)
    e2e = ttft + tpot * (out - 1)
    # ITL figures from 32 gaps per request around its TPOT (enough for p99 and max, cheap to draw).
    gaps = np.repeat(tpot, 32) * np.exp(rng.normal(-0.045, 0.3, size=32 * requests))
    gap_knee = np.quantile(gaps, 0.9)
    gaps = np.where(gaps > gap_knee, gap_knee + (gaps - gap_knee) * itl_tail_scale, gaps)
    itl_median, itl_p95, itl_p99 = np.percentile(gaps, [50, 95, 99])
    ttft_median, ttft_p95, ttft_p99 = np.percentile(ttft, [50, 95, 99])
    e2e_median, e2e_p95, e2e_p99 = np.percentile(e2e, [50, 95, 99])
    duration = e2e.sum() / concurrency / 1000.0
    bench = BenchFigures(
        completed=requests, duration=float(duration), total_output_tokens=int(out.sum()),
        request_throughput=float(requests / duration), output_throughput=float(out.sum() / duration),
        median_e2e_latency_ms=float(e2e_median), p95_e2e_latency_ms=float(e2e_p95), p99_e2e_latency_ms=float(e2e_p99),
        median_ttft_ms=float(ttft_median), p95_ttft_ms=float(ttft_p95), p99_ttft_ms=float(ttft_p99),
        mean_ttft_ms=float(ttft.mean()), median_tpot_ms=float(np.median(tpot)),
        median_itl_ms=float(itl_median), p95_itl_ms=float(itl_p95), p99_itl_ms=float(itl_p99),
        max_itl_ms=float(gaps.max()), concurrency=float(concurrency),
    )
    samples = RequestSamples(ttft_ms=ttft.tolist(), e2e_ms=e2e.tolist(), tpot_ms=tpot.tolist(),
                             output_tokens=out.tolist()) if with_samples else RequestSamples()
    cost = None if gpu_hour_price is None else gpu_hour_price / (bench.output_throughput * 3600.0) * 1e6
    return RoundResult(
        status=RoundStatus.OK, provenance=Provenance(source=Source.SIMULATED, runner="synthetic"),
        bench=bench, server=ServerMetrics(), failure_rate=failure_rate, cost_per_1m_output_tokens=cost,
        samples=samples,
    )
