"""Reading order steps 5-9: what the server's own metrics and logs say (casebook, Server Metrics)."""

from __future__ import annotations

from service.diagnosis import casebook as cb
from service.diagnosis.findings import Evidence, Finding
from service.diagnosis.observed import Observed


def queue_and_token_usage(obs: Observed) -> Finding | None:
    """Step 5: a queue with token_usage near 1 is a KV shortage; with KV headroom, a compute limit."""
    queue, usage = obs.queue(), obs.metric("token_usage")
    if usage is None:
        return None
    evidence: Evidence = {"num_queue_reqs": queue, "token_usage": usage, "num_running_reqs": obs.metric("num_running_reqs")}
    if queue is not None and queue >= cb.QUEUE_BUILDING:
        if usage >= cb.TOKEN_USAGE_FULL:
            return Finding(
                id="kv_cache_shortage", step=5, severity="warning", kind="cause",
                title=f"{queue:g} requests wait while token_usage is {usage:.2f}: the KV cache is the bottleneck.",
                evidence=evidence, rule=cb.KV_SHORTAGE.text, source=cb.KV_SHORTAGE.source,
                technique=cb.QUANTIZATION, alternatives=[cb.PARALLELISM, cb.BATCH_PARAMETERS],
            )
        if _utilization_low(obs):
            return None  # step 6 names it a scheduling limit
        return _compute_bound(obs, queue, usage, evidence)
    if usage >= cb.TOKEN_USAGE_PREEMPTION:
        return Finding(
            id="kv_cache_near_saturation", step=5, severity="warning", kind="cause",
            title=f"token_usage {usage:.2f} is at the edge of the KV pool: the next burst preempts requests.",
            evidence=evidence, rule=cb.KV_SATURATION.text, source=cb.KV_SATURATION.source,
            technique=cb.BATCH_PARAMETERS, alternatives=[cb.QUANTIZATION],
        )
    return None


def _compute_bound(obs: Observed, queue: float, usage: float, evidence: Evidence) -> Finding:
    moe = obs.context.model_is_moe
    # Case 5: a MoE split by TP alone makes every GPU join every expert's communication; expert
    # parallelism and DP attention are the fix. A dense model gets more replicas or a better TP split.
    if moe and (obs.context.ep_size or 1) <= 1:
        technique, alternatives = cb.MOE_PARALLELISM, [cb.PARALLELISM, cb.PD_DISAGGREGATION]
    else:
        technique, alternatives = cb.PARALLELISM, [cb.MOE_PARALLELISM] if moe is None else []
    return Finding(
        id="compute_bound", step=5, severity="warning", kind="cause",
        title=f"{queue:g} requests wait although token_usage {usage:.2f} leaves KV headroom: the bottleneck is "
              "computation and communication, not memory.",
        evidence=evidence | {"model_is_moe": _flag(moe), "ep_size": obs.context.ep_size},
        rule=cb.COMPUTE_BOUND.text, source=cb.COMPUTE_BOUND.source,
        technique=technique, alternatives=alternatives,
    )


def _utilization_low(obs: Observed) -> bool:
    utilization = obs.metric("utilization")
    return utilization is not None and utilization < cb.UTILIZATION_LOW


def scheduling_limit(obs: Observed) -> Finding | None:
    """Step 6: low utilisation with a long queue is a scheduling limit, not a capacity one."""
    queue, utilization = obs.queue(), obs.metric("utilization")
    if queue is None or queue < cb.QUEUE_BUILDING or not _utilization_low(obs):
        return None
    return Finding(
        id="scheduling_limit", step=6, severity="warning", kind="cause",
        title=f"{queue:g} requests wait while utilization is only {utilization:.2f}: the scheduler, not the GPU, "
              "limits admission.",
        evidence={"num_queue_reqs": queue, "utilization": utilization, "token_usage": obs.metric("token_usage")},
        rule=cb.SCHEDULING.text, source=cb.SCHEDULING.source,
        technique=cb.BATCH_PARAMETERS, alternatives=[cb.PARALLELISM],
    )


def cache_below_sharing(obs: Observed) -> Finding | None:
    """Step 7: a cache hit rate well below the profile's prefix sharing rate."""
    hit = obs.metric("cache_hit_rate")
    sharing = obs.profile.prefix_sharing_rate if obs.profile is not None else None
    if hit is None or sharing is None or sharing - hit < cb.CACHE_GAP:
        return None
    technique, alternatives, why = _cache_technique(obs)
    rule = cb.CACHE_EVICTIONS if technique == cb.ROUTER_POLICY else cb.CACHE_BELOW_SHARING
    return Finding(
        id="cache_hit_below_sharing", step=7, severity="warning", kind="cause",
        title=f"cache_hit_rate {hit:.2f} is {sharing - hit:.2f} below the prefix sharing rate {sharing:.2f}: {why}",
        evidence={"cache_hit_rate": hit, "prefix_sharing_rate": sharing, "gap": round(sharing - hit, 3),
                  "workers": obs.context.workers, "router_policy": obs.context.router_policy, **_tier_evidence(obs)},
        rule=rule.text, source=rule.source, technique=technique, alternatives=alternatives,
    )


def _tier_evidence(obs: Observed) -> Evidence:
    """The cached share of prompt tokens per tier (`sglang:cached_tokens_total` by `cache_source`)."""
    tiers = obs.metrics.server.cache_hit_rate_by_tier if obs.metrics is not None else None
    return {f"cached_share_{tier}": round(share, 4) for tier, share in (tiers or {}).items()}


def _cache_technique(obs: Observed) -> tuple[str, list[str], str]:
    assert obs.profile is not None
    prefix, ctx = obs.profile.prefix, obs.context
    variable_front = prefix.variable_tokens > 0 and prefix.variable_position == "front"
    tools_late = prefix.tools_position == "after_history" and prefix.tool_definition_tokens > 0 and prefix.history_tokens > 0
    if variable_front or tools_late:
        return cb.PROMPT_STRUCTURE, [cb.ROUTER_POLICY], "the prompt puts varying text before the shared part."
    workers = ctx.workers or 1
    # cache_aware and SMG's prefix_hash both send a shared prefix where it is cached.
    if workers > 1 and ctx.router_policy not in (None, "cache_aware", "prefix_hash"):
        return (cb.ROUTER_POLICY, [cb.PROMPT_STRUCTURE],
                f"{workers} workers behind a {ctx.router_policy} router each prefill the same prefixes.")
    if workers == 1 and (ctx.tp_size or 1) > 1 and prefix.documents is not None:
        # Case 2, round 1: split the TP instance into replicas behind cache_aware routing so each worker
        # caches a subset of the documents instead of one pool evicting them all.
        return (cb.ROUTER_POLICY, [cb.PARALLELISM, cb.HICACHE, cb.PROMPT_STRUCTURE],
                f"the {prefix.documents.count:,} documents do not stay cached in one TP{ctx.tp_size} instance; "
                "the gap is lost to evictions.")
    return (cb.PROMPT_STRUCTURE, [cb.ROUTER_POLICY, cb.HICACHE],
            "review the prompt for variable values at the beginning.")


def retractions(obs: Observed) -> Finding | None:
    """Step 8: retracted (preempted) requests are recomputed from scratch."""
    counted = obs.metric("num_retracted_requests_total") or obs.metric("num_retracted_reqs") or 0.0
    warnings = obs.log.preemption_warnings
    if counted <= 0 and warnings == 0:
        return None
    return Finding(
        id="retractions", step=8, severity="warning", kind="cause",
        title=f"Requests were preempted ({int(counted)} retracted, {warnings} 'preempting' warnings): their work "
              "is recomputed; lower mem-fraction-static or raise schedule-conservativeness.",
        evidence={"num_retracted_requests_total": counted, "preemption_warnings": warnings,
                  "preempted_requests_logged": obs.log.preempted_requests, "token_usage": obs.metric("token_usage")},
        rule=cb.RETRACTIONS.text, source=cb.RETRACTIONS.source,
        technique=cb.BATCH_PARAMETERS, alternatives=[cb.QUANTIZATION],
    )


def speculative_accept(obs: Observed) -> Finding | None:
    """Step 9: a low speculative accept length costs more draft work than it saves."""
    length, rate = obs.accept_length(), obs.accept_rate()
    low_length = length is not None and length < cb.SPEC_ACCEPT_LENGTH_LOW
    low_rate = rate is not None and rate < cb.SPEC_ACCEPT_RATE_LOW
    if not (low_length or low_rate):
        return None
    shown = f"accept length {length:.2f}" if length is not None else f"accept rate {rate:.3f}"
    if length is not None and obs.log.draft_tokens:
        shown += f" of {obs.log.draft_tokens}"
    return Finding(
        id="speculative_accept_low", step=9, severity="warning", kind="cause",
        title=f"Speculative decoding {shown}: the draft costs more than it saves; turn it off.",
        evidence={"accept_length": length, "accept_rate": rate, "draft_overhead_ratio": obs.log.draft_overhead_ratio,
                  "concurrency": obs.figure("concurrency")},
        rule=cb.SPEC_ACCEPT.text, source=cb.SPEC_ACCEPT.source, technique=cb.SPECULATIVE_DECODING,
    )


def expert_imbalance(obs: Observed) -> Finding | None:
    """Step 5 under EP: the busiest GPU rank's expert load (`sglang:eplb_balancedness`, mean/max per rank)."""
    server = obs.metrics.server if obs.metrics is not None else None
    balance = server.eplb_balancedness if server is not None else None
    if balance is None or balance >= cb.EPLB_BALANCEDNESS_LOW:
        return None
    return Finding(
        id="expert_imbalance", step=5, severity="warning", kind="cause",
        title=f"eplb_balancedness {balance:.2f}: the busiest GPU rank carries {1 / balance:.1f}x the average expert "
              "load and every MoE layer waits for it; enable EPLB (--enable-eplb with redundant experts).",
        evidence={"eplb_balancedness": balance, "rank_imbalance": round(1 / balance, 3), "ep_size": obs.context.ep_size,
                  "dp_attention_imbalance": server.dp_attention_imbalance if server is not None else None},
        rule=cb.EXPERT_IMBALANCE.text, source=cb.EXPERT_IMBALANCE.source, technique=cb.MOE_PARALLELISM,
    )


def _flag(value: bool | None) -> str | None:
    return None if value is None else str(value).lower()


SERVER_RULES = (queue_and_token_usage, expert_imbalance, scheduling_limit, cache_below_sharing, retractions,
                speculative_accept)
