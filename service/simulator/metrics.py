"""Aggregating a simulated round into a `RoundResult`, with bench_serving's definitions.

`benchmark/serving.py` calculate_metrics: TPOT = (latency - TTFT) / (output_len - 1) for outputs longer
than one token, concurrency = sum(E2E) / duration, percentiles by `np.percentile`; ITL percentiles are
over every token gap (weighted here by the tokens that share a gap). Server gauges are time averages over
the measured phase (Prometheus gauges sampled every step).
"""

from __future__ import annotations

import numpy as np

from service.domain import (
    SLO,
    BenchFigures,
    Provenance,
    RequestSamples,
    RoundResult,
    RoundStatus,
    Scenario,
    ServerMetrics,
    Source,
    goodput,
    goodput_slos,
)
from service.simulator.cluster import Cluster
from service.simulator.engine import Outcome
from service.simulator.grammar import prompt_only_failures

PERCENTILES = (50, 90, 95, 99)


def _stats(values: np.ndarray, prefix: str, suffix: str = "_ms") -> dict[str, float]:
    if not len(values):
        return {f"mean_{prefix}{suffix}": 0.0, **{f"{_pname(p)}_{prefix}{suffix}": 0.0 for p in PERCENTILES}}
    out = {f"mean_{prefix}{suffix}": float(values.mean())}
    for p, v in zip(PERCENTILES, np.percentile(values, PERCENTILES), strict=True):
        out[f"{_pname(p)}_{prefix}{suffix}"] = float(v)
    return out


def _pname(p: int) -> str:
    return "median" if p == 50 else f"p{p}"


def weighted_percentiles(v: np.ndarray, w: np.ndarray, qs: tuple[int, ...]) -> tuple[float, list[float]]:
    """Mean and percentiles of values `v` each repeated `w` times, without expanding them."""
    if not len(v) or w.sum() <= 0:
        return 0.0, [0.0 for _ in qs]
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    cum = np.cumsum(w)
    total = cum[-1]
    picks = [float(v[min(np.searchsorted(cum, q / 100 * total, side="left"), len(v) - 1)]) for q in qs]
    return float((v * w).sum() / total), picks


def bench_figures(outcome: Outcome, cluster: Cluster, slo: SLO | None = None) -> BenchFigures:
    """bench_serving's output-file figures for the measured requests (scaled for representative replicas).

    With an SLO that sets latency targets, goodput and SLO attainment as `--goodput` gives them.
    """
    scale = cluster.scale
    done = [r for r in outcome.measured if r.finish >= 0 and not r.aborted]
    duration = max(outcome.end - outcome.start, 1e-9)
    ttft = np.array([(r.first_token - r.issued) * 1000 for r in done])
    e2e = np.array([(r.finish - r.issued) * 1000 for r in done])
    tpot = np.array([(r.finish - r.first_token) * 1000 / (r.output_len - 1) for r in done if r.output_len > 1])
    total_in = sum(r.input_len for r in done) * scale
    total_out = sum(r.output_len for r in done) * scale
    rec = cluster.recorder
    values, weights = rec.itl_samples()
    itl_mean, itl_p = weighted_percentiles(values, weights, PERCENTILES)
    itl = {"mean_itl_ms": itl_mean * 1000, **{f"{_pname(p)}_itl_ms": v * 1000 for p, v in zip(PERCENTILES, itl_p,
                                                                                             strict=True)}}
    bounds = goodput_slos(slo) if slo is not None else {}
    good = goodput(bounds, [((r.first_token - r.issued) * 1000,
                             (r.finish - r.first_token) * 1000 / (r.output_len - 1) if r.output_len > 1 else 0.0,
                             (r.finish - r.issued) * 1000) for r in done],
                   len(outcome.measured), duration, scale) if bounds else None
    return BenchFigures(
        request_goodput=good[0] if good else None, slo_attainment=good[1] if good else None,
        goodput_slos_ms=bounds or None, completed=len(done) * scale, duration=duration, total_input_tokens=total_in, total_output_tokens=total_out,
        request_throughput=len(done) * scale / duration, input_throughput=total_in / duration,
        output_throughput=total_out / duration, total_throughput=(total_in + total_out) / duration,
        **_stats(e2e, "e2e_latency"), **_stats(ttft, "ttft"), **_stats(tpot, "tpot"), **itl,
        max_itl_ms=float(values[weights > 0].max()) * 1000 if len(values) else 0.0, concurrency=float(e2e.sum() / 1000 / duration) * scale,
        accept_length=rec.spec_emitted / rec.spec_steps if rec.spec_steps else None,
        max_concurrent_requests=outcome.max_inflight * scale,
    )


def server_metrics(cluster: Cluster) -> ServerMetrics:
    """Gauges and counters named as SGLang's Prometheus metrics (`sglang:` dropped)."""
    rec = cluster.recorder
    t = rec.gauge_time or 1.0
    compiles = [s for pool in cluster.pools.values() for g in pool.grammar if g for s in g.compile_seconds]
    lookups = sum(g.lookups for pool in cluster.pools.values() for g in pool.grammar if g)
    hits = sum(g.hits for pool in cluster.pools.values() for g in pool.grammar if g)
    grammar_on = any(g for pool in cluster.pools.values() for g in pool.grammar)
    tiers = None
    if rec.input_tokens:
        tiers = {"device": (rec.cached_tokens - rec.host_tokens) / rec.input_tokens}
        if any(pool.server.enable_hierarchical_cache for pool in cluster.pools.values()):
            tiers["host"] = rec.host_tokens / rec.input_tokens
    # SGLang's balancedness is mean/max physical expert load per GPU rank (`eplb/expert_distribution.py`).
    ranks = [p.balance.rank_imbalance for p in cluster.pools.values()
             if p.balance is not None and p.server.ep_size > 1]
    return ServerMetrics(
        cache_hit_rate_by_tier=tiers, eplb_balancedness=1.0 / max(ranks) if ranks else None,
        token_usage=round(rec.usage_area / t, 4),
        cache_hit_rate=rec.cached_tokens / rec.input_tokens if rec.input_tokens else 0.0,
        num_queue_reqs=rec.queue_area / t, num_running_reqs=rec.running_area / t,
        num_retracted_requests_total=rec.retractions * cluster.scale,
        spec_accept_length=rec.spec_emitted / rec.spec_steps if rec.spec_steps else None,
        spec_accept_rate=(rec.spec_emitted - rec.spec_steps) / rec.spec_proposed if rec.spec_proposed else None,
        grammar_compile_time_mean_ms=float(np.mean(compiles) * 1000) if compiles else (0.0 if grammar_on else None),
        grammar_compile_time_p99_ms=float(np.percentile(compiles, 99) * 1000) if compiles else (
            0.0 if grammar_on else None),
        grammar_cache_hit_rate=hits / lookups if lookups else None,
    )


def cost_model_detail(cluster: Cluster) -> str:
    """The step models' own provenance lines, once each, with the worker roles when they differ."""
    roles: dict[str, list[str]] = {}
    for worker in cluster.all_workers():
        seen = roles.setdefault(worker.setup.cost.describe(), [])
        if worker.setup.role not in seen:
            seen.append(worker.setup.role)
    if len(roles) == 1:
        return next(iter(roles))
    return " | ".join(f"{'/'.join(who)}: {text}" for text, who in roles.items())


# How a request refused at the server's door reads (`Worker.refusal`, a trace's over-window record).
REFUSED = "refused: "


def _failures(outcome: Outcome) -> str:
    """Failed requests by reason: "12 requests aborted: KV cache pool exhausted; 3 requests refused: ..."."""
    reasons: dict[str, int] = {}
    for r in outcome.measured:
        if r.aborted:
            reasons[r.failure] = reasons.get(r.failure, 0) + 1
    return "; ".join(f"{count} requests {reason}" for reason, count in reasons.items())


def round_result(scenario: Scenario, outcome: Outcome, cluster: Cluster, cost_model: str,
                 rng: np.random.Generator) -> RoundResult:
    """The whole `RoundResult` of a simulated round."""
    bench = bench_figures(outcome, cluster, scenario.slo)
    server = server_metrics(cluster)
    done = [r for r in outcome.measured if r.finish >= 0 and not r.aborted]
    aborted = sum(1 for r in outcome.measured if r.aborted)
    constrained = any(g for pool in cluster.pools.values() for g in pool.grammar)
    failures = prompt_only_failures(scenario.workload.structured_output, constrained, len(done), rng)
    n = max(len(outcome.measured), 1)
    notes = list(cluster.notes)
    if failures:
        split = ", ".join(f"{k} {v / n:.2%}" for k, v in failures.items())
        notes.append(f"prompt-only JSON: {sum(failures.values()) / n:.2%} of outputs invalid ({split})")
    if outcome.truncated:
        notes.append("the simulation hit its event limit before every request finished")
    # Nothing left to run while requests wait: the simulated scheduler could never place them. They count as
    # failed, so a round that lost requests is never read as a clean one.
    stuck = 0 if outcome.truncated else sum(1 for r in outcome.measured if r.finish < 0 and not r.aborted)
    if stuck:
        notes.append(f"{stuck} of {len(outcome.measured)} requests never finished: the simulated scheduler had "
                     "nothing it could run while they waited")
    if cut := [r for r in outcome.measured if r.output_cut]:
        notes.append(f"{len(cut)} of {len(outcome.measured)} requests stopped {sum(r.output_cut for r in cut):,} output "
                     "tokens short: prompt and output together exceed the KV pool, and SGLang caps max_new_tokens "
                     "to fit it (max_req_len)")
    price = scenario.hardware.gpu_hour_price * scenario.deployment.total_gpus()
    cost = price / (bench.output_throughput * 3600 / 1e6) if bench.output_throughput > 0 else None
    balances = [p.balance for p in cluster.pools.values() if p.balance is not None]
    steps = sum(w.steps for w in cluster.all_workers()) * cluster.scale
    fallback = sum(c.fallback_steps() for c in cluster.costs) * cluster.scale
    return RoundResult(
        status=RoundStatus.PARTIAL if aborted or stuck or outcome.truncated else RoundStatus.OK,
        provenance=Provenance(source=Source.SIMULATED, runner="simulated", cost_model=cost_model,
                              cost_model_fallback_steps=fallback, cost_model_steps=steps,
                              cost_model_detail=cost_model_detail(cluster),
                              sglang_version=scenario.sglang_version, note="; ".join(cluster.notes)),
        bench=bench, server=server,
        failure_rate=(sum(failures.values()) + aborted + stuck) / n,
        expert_imbalance=max(b.expert_imbalance for b in balances) if balances else None,
        cost_per_1m_output_tokens=cost,
        samples=RequestSamples(
            ttft_ms=[(r.first_token - r.issued) * 1000 for r in done],
            e2e_ms=[(r.finish - r.issued) * 1000 for r in done],
            tpot_ms=[(r.finish - r.first_token) * 1000 / (r.output_len - 1) if r.output_len > 1 else 0.0
                     for r in done],
            output_tokens=[r.output_len for r in done]),
        error=_failures(outcome) if aborted else None,
        error_phase="load" if aborted else None,
        # A prompt refused for the deployment's limits (its KV pool, the context window) is refused the same way on
        # every launch: measuring the deployment again cannot change it.
        config_fault=any(r.aborted and r.failure.startswith(REFUSED) for r in outcome.measured),
        notes=notes,
    )
