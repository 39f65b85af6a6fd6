"""TP size against replicas behind a router, and the router's policy."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from plugins.techniques._rules import (
    at_tp,
    clients_of,
    fit_balance,
    main_server,
    no_smaller_tp,
    replica_split,
    router_note,
    sharing_rate,
    smallest_replica_tp,
    tried_deltas,
    without_router,
)
from service import Applicability, ConfigDelta, Technique, TuningContext

# Casebook "Prefix Sharing Rate": below 0.2 RadixAttention offers almost no benefit.
CACHE_WORTHWHILE = 0.2
# Input p95 over median from which request sizes count as uneven (a long prompt is several short ones' work).
UNEVEN_SIZES = 2.0


def size_spread(ctx: TuningContext) -> float:
    """Input length p95 over median: 1 for fixed lengths, the workload's own ratio otherwise."""
    dist = ctx.scenario.workload.input
    if dist.kind == "fixed" or dist.median <= 0:
        return 1.0
    if dist.kind == "empirical" and dist.samples:
        ordered = sorted(dist.samples)
        return ordered[int(0.95 * (len(ordered) - 1))] / max(ordered[len(ordered) // 2], 1)
    if dist.kind == "uniform":
        return (1 + dist.range_ratio) / max(1 - dist.range_ratio, 1e-9) if dist.range_ratio < 1 else float("inf")
    return dist.p95 / dist.median if dist.p95 else 1.0


def smg_policies(ctx: TuningContext) -> dict[str, str]:
    """SMG's own policies that fit this traffic, each with why (only for a deployment whose router is SMG)."""
    router = ctx.scenario.deployment.router
    if router is None or router.package != "smg":
        return {}
    out = {}
    rate, spread = sharing_rate(ctx.scenario), size_spread(ctx)
    if rate >= CACHE_WORTHWHILE:
        out["prefix_hash"] = (f"sharing rate {rate:.2f}: prefix_hash sends a shared prefix to the worker its hash "
                              "names, keeping cache_aware's locality without its per-request tree walk and insert")
    if spread >= UNEVEN_SIZES:
        out["least_load"] = (f"input p95 is {spread:.1f}x the median: least_load routes by the workers' queued "
                             "token work and KV pressure rather than request counts, so long prompts do not "
                             "pile up on one worker")
    return out


def preferred_policy(ctx: TuningContext) -> str:
    """cache_aware when prefixes are shared (cases 1, 2), else power_of_two for pure load balance (case 5)."""
    return "cache_aware" if sharing_rate(ctx.scenario) >= CACHE_WORTHWHILE else "power_of_two"


def _layout(delta: ConfigDelta) -> tuple[int, int, str | None] | None:
    """(TP, replicas, router policy) of a candidate that re-cuts the deployment (None when it does not)."""
    if delta.deployment is None or len(delta.deployment.groups) != 1:
        return None
    group, router = delta.deployment.groups[0], delta.deployment.router
    return group.server.tp_size, group.replicas, router.policy if router else None


def _split_candidates(ctx: TuningContext, compare: list[str]) -> tuple[list[ConfigDelta], list[str]]:
    """The replica splits router_policy would run on one instance, and the ones parallelism already ran.

    A layout and router policy that parallelism measured in this job (and rolled back, or the deployment
    would no longer be one instance) answers the routing question too: the same split is not run twice. The
    layout is compared, not every flag: between the two steps only a chunk setting can have been kept, which
    does not move a TP-against-replicas balance (TP1 x 4 of a 2B model lost 41% before mixed chunking and
    43% after); a change that does (EAGLE3) reopens parallelism itself.
    """
    sizes = _split_sizes(ctx, main_server(ctx.scenario).tp_size)
    if not sizes:
        return [], []
    tp = sizes[0]  # the smallest TP whose replicas each get a request in flight
    replicas = ctx.scenario.deployment.total_gpus() // tp
    measured = {_layout(delta) for delta in tried_deltas(ctx, Parallelism.name)}
    fresh, done = [], []
    for policy in compare:
        split = replica_split(ctx.scenario, tp, policy)
        delta = ConfigDelta(technique=RouterPolicy.name,
                            summary=f"TP{tp} x {replicas} + {policy} router{router_note(split.router)}",
                            deployment=split)
        (done if _layout(delta) in measured else fresh).append(delta)
    return fresh, [delta.summary for delta in done]


def lone_client(ctx: TuningContext) -> str | None:
    """Why replicas cannot help a benchmark that keeps one request in flight (None when it keeps more).

    Replicas raise throughput and cut queueing by each filling its own batch; with one client stream, one
    replica holds the request and every other sits idle, while the smaller TP only slows the one request.
    """
    if clients_of(ctx.scenario) != 1:
        return None
    return ("One client stream keeps one request in flight: a second replica would sit idle, and a smaller TP "
            "only slows the one request (replicas pay off by filling their own batches, casebook case 1).")


def _single_unified(ctx: TuningContext) -> bool:
    groups = ctx.scenario.deployment.groups
    return len(groups) == 1 and groups[0].role == "unified" and groups[0].replicas == 1


class Parallelism(Technique):
    """Re-cut one wide TP instance into smaller TP replicas behind a router (casebook case 1 round 4), or
    replicas whose median ITL misses its SLO into wider TP instances."""

    name: ClassVar[str] = "parallelism"
    rank: ClassVar[int] = 2
    description: ClassVar[str] = ("TP2 x 4 replicas beat TP8 x 1 on throughput and TTFT when the ITL SLO has "
                                  "headroom: less all-reduce, and each replica fills its own batch.")

    def applicable(self, ctx: TuningContext) -> Applicability:
        if ctx.scenario.deployment.is_pd or len(ctx.scenario.deployment.groups) != 1:
            return Applicability(False, "The deployment already has separate roles or groups.")
        if ctx.model.is_moe and ctx.scenario.hardware.nodes > 1:
            return Applicability(False, "A multi-node MoE is split by expert parallelism, not TP replicas.")
        server = main_server(ctx.scenario)
        tp, target = server.tp_size, smallest_replica_tp(ctx.model, ctx.scenario)
        if _merge_sizes(ctx) and _itl_missed(ctx) and ctx.baseline is not None:
            return Applicability(True, f"Median ITL {ctx.baseline.bench.median_itl_ms:.1f} ms misses the "
                                       f"{ctx.scenario.slo.itl_median_ms:g} ms SLO: a wider TP spreads each token "
                                       "over more GPUs (case 1: 'If the ITL SLO were tighter, like 15ms, the "
                                       "opposite conclusion would have been necessary').")
        if _merge_sizes(ctx):
            replicas, clients = ctx.scenario.deployment.groups[0].replicas, clients_of(ctx.scenario)
            return Applicability(True, f"{replicas} replicas for {clients} request{'s' if clients > 1 else ''} in "
                                       f"flight: {replicas - clients} sit idle, while a wider TP on the same GPUs "
                                       "spreads each request's tokens over more of them (replicas pay off by "
                                       "filling their own batches, casebook case 1).")
        if tp <= target and not _staged(ctx):
            return Applicability(False, no_smaller_tp(ctx.model, ctx.scenario))
        if _staged(ctx) and _split_sizes(ctx, tp):
            return Applicability(True, f"TP{tp} x PP{server.pp_size} runs each token through {server.pp_size} "
                                       "pipeline stages in turn; within one node the same GPUs as one TP instance "
                                       "(or TP replicas) read their share of the weights at once.")
        if lone := lone_client(ctx):
            return Applicability(False, lone)
        if not _split_sizes(ctx, tp):
            return Applicability(False, f"Every split of TP{tp} down to TP{target} makes more replicas than the "
                                        f"{clients_of(ctx.scenario)} requests in flight: the extra replicas would "
                                        "sit idle.")
        if (tight := _itl_tight(ctx)) and not _spans_nodes(ctx):
            return Applicability(False, tight)
        if _spans_nodes(ctx):
            per_node = ctx.scenario.hardware.gpus_per_node
            return Applicability(True, f"TP{tp} spans {-(-tp // per_node)} nodes: every layer's all-reduce crosses "
                                       f"the network between them; replicas of at most TP{per_node} keep it inside "
                                       "a node's NVLink (case 1: less all-reduce, each replica its own batch).")
        return Applicability(True, f"TP{tp} spends an all-reduce per layer and idles GPUs at small batches; "
                                   f"TP{target} replicas behind a router raise throughput and cut TTFT (case 1).")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        tp = main_server(ctx.scenario).tp_size
        gpus = ctx.scenario.deployment.total_gpus()
        policy = preferred_policy(ctx)
        out = []
        for size in _merge_sizes(ctx) or _split_sizes(ctx, tp):
            if size >= gpus:  # one TP instance on the deployment's GPUs: nothing to route
                group = ctx.scenario.deployment.groups[0]
                worker = msgspec.structs.replace(group, replicas=1, server=at_tp(group.server, size))
                what = "without pipeline stages" if _staged(ctx) else f"x 1 (from TP{tp} x {gpus // tp})"
                out.append(ConfigDelta(technique=self.name, summary=f"TP{size} {what}",
                                       deployment=without_router(ctx.scenario.deployment, worker)))
                continue
            split = replica_split(ctx.scenario, size, policy)
            out.append(ConfigDelta(technique=self.name,
                                   summary=f"TP{size} x {gpus // size} + {policy} router{router_note(split.router)}",
                                   deployment=split))
        return out


def _split_sizes(ctx: TuningContext, tp: int) -> list[int]:
    """The replica TP sizes below `tp` worth measuring: from the smallest that leaves room for KV, doubling,
    leaving out splits into more replicas than the benchmark keeps requests in flight (the extra ones idle).

    An instance with pipeline stages inside one node is measured up to TP over all its GPUs (TP1 x PP2 on
    two GPUs: TP2, the same weights on each GPU); a smaller TP than the stages' fits no weights."""
    gpus, clients = ctx.scenario.deployment.total_gpus(), clients_of(ctx.scenario)
    size, out = smallest_replica_tp(ctx.model, ctx.scenario), []
    top = tp
    if _staged(ctx):
        server = main_server(ctx.scenario)
        top = server.tp_size * server.pp_size + 1
        # Fewer GPUs per request make a slower token: with no ITL headroom, or one request in flight, the same GPUs only.
        size = top - 1 if _itl_tight(ctx) or lone_client(ctx) else min(size, top - 1)
    if _spans_nodes(ctx) and _itl_tight(ctx):
        # No ITL headroom: only the split that takes the all-reduce off the network, no smaller TP and no
        # wider one still spanning nodes.
        per_node = ctx.scenario.hardware.gpus_per_node
        fits = size <= per_node < top and not 0 < clients < gpus // per_node
        return [per_node] if fits else []
    while size < top:
        if not 0 < clients < gpus // size:
            out.append(size)
        size *= 2
    return out


def _merge_sizes(ctx: TuningContext) -> list[int]:
    """Wider TP sizes for replicas whose measured median ITL misses its SLO, or that outnumber the requests in
    flight (the extra ones idle) under any objective but cost (right_sizing drops those instead): each doubling
    of the TP up to one node, on the same GPUs in fewer replicas, none more than the requests in flight.

    Casebook case 1: TP2 x 4 was adopted because its 17.9 ms ITL was "well within the SLO of 50ms"; a tighter
    target takes the wider TP. Llama-3.1-70B as TP4 x 2 on eight H100s at 16 streams decodes at 15.7 ms against
    a 12 ms target; more replicas of it never would. Four TP2 replicas of the 27B for one user leave three
    idle, the one request decoding at 10.6 ms where TP8 would spread it over all eight GPUs."""
    deployment = ctx.scenario.deployment
    if deployment.is_pd or len(deployment.groups) != 1:
        return []
    group = deployment.groups[0]
    server = group.server
    gpus, clients = deployment.total_gpus(), clients_of(ctx.scenario)
    idle = 0 < clients < group.replicas and ctx.scenario.objective.kind != "cost"
    if group.replicas < 2 or server.pp_size > 1 or server.dp_size > 1 or not (_itl_missed(ctx) or idle):
        return []
    sizes, size = [], server.tp_size * 2
    while size <= min(ctx.scenario.hardware.gpus_per_node, gpus):
        if not 0 < clients < gpus // size:  # more replicas than requests in flight: the extra ones idle
            sizes.append(size)
        size *= 2
    return sizes


def _itl_missed(ctx: TuningContext) -> bool:
    """Whether the last kept round's median ITL misses the SLO's target."""
    itl = ctx.scenario.slo.itl_median_ms
    return itl is not None and ctx.baseline is not None and ctx.baseline.bench.median_itl_ms > itl


def _itl_tight(ctx: TuningContext) -> str:
    """Why the measured median ITL leaves no room for a smaller TP ("" when it does, or is unmeasured)."""
    itl_slo = ctx.scenario.slo.itl_median_ms
    if itl_slo is not None and ctx.baseline is not None and ctx.baseline.bench.median_itl_ms > 0.5 * itl_slo:
        return (f"Median ITL {ctx.baseline.bench.median_itl_ms:.1f} ms leaves no headroom under the "
                f"{itl_slo:.0f} ms SLO; smaller TP would raise it (case 1).")
    return ""


def _spans_nodes(ctx: TuningContext) -> bool:
    """Whether one instance's TP spans nodes (its all-reduce crosses the network between them)."""
    return main_server(ctx.scenario).tp_size > ctx.scenario.hardware.gpus_per_node


def _staged(ctx: TuningContext) -> bool:
    """Whether the instance runs pipeline stages (pp-size > 1) inside one node."""
    server = main_server(ctx.scenario)
    return server.pp_size > 1 and server.tp_size * server.pp_size <= ctx.scenario.hardware.gpus_per_node


class RouterPolicy(Technique):
    """round_robin, power_of_two or cache_aware: with shared prefixes the routing policy is a cache policy."""

    name: ClassVar[str] = "router_policy"
    rank: ClassVar[int] = 4
    description: ClassVar[str] = ("With high prefix sharing, round-robin halves the effective cache; cache_aware "
                                  "sends a prefix to the worker that holds it (casebook case 2 round 1).")

    def applicable(self, ctx: TuningContext) -> Applicability:
        deployment = ctx.scenario.deployment
        if deployment.is_pd:
            return Applicability(False, "PD routers are set by pd_disaggregation (cache_aware prefill, "
                                        "power_of_two decode).")
        preferred = preferred_policy(ctx)
        if _single_unified(ctx) and (ranks := _dp_ranks(ctx)) and not lone_client(ctx):
            tp = main_server(ctx.scenario).tp_size
            return Applicability(True, f"dp-size {ranks} hands requests to its {ranks} ranks in turn (SGLang's DP "
                                       "controller: round_robin), each rank with its own radix cache; as "
                                       f"{ranks} TP{tp} replicas behind the router, sharing rate "
                                       f"{sharing_rate(ctx.scenario):.2f} favours {preferred} (casebook case 2: "
                                       "round-robin scatters shared prefixes).")
        if _single_unified(ctx):
            if deployment.total_gpus() < 2 * smallest_replica_tp(ctx.model, ctx.scenario):
                return Applicability(False, "Too few GPUs for two replicas, so there is nothing to route.")
            if lone := lone_client(ctx):
                return Applicability(False, lone)
            fresh, done = _split_candidates(ctx, _compared(ctx))
            if not fresh and not done:
                return Applicability(False, f"Every split makes more replicas than the {clients_of(ctx.scenario)} "
                                            "requests in flight: the extra replicas would sit idle.")
            if not fresh:
                return Applicability(False, f"Parallelism already measured {' and '.join(done)} in this job; "
                                            "the same split is not run again for its router.")
            return Applicability(True, f"Splitting into replicas makes routing part of the caching strategy; "
                                       f"sharing rate {sharing_rate(ctx.scenario):.2f} favours {preferred} (case 2).")
        current = deployment.router.policy if deployment.router else None
        if lone_client(ctx) and sharing_rate(ctx.scenario) < CACHE_WORTHWHILE:
            return Applicability(False, "One client stream keeps one request in flight and its prompts share no "
                                        "prefix: every policy sends it to an idle worker with nothing cached.")
        smg = {policy: why for policy, why in smg_policies(ctx).items() if policy != current}
        if current == preferred and not smg:
            return Applicability(False, f"The router already uses {preferred}, the casebook's choice here.")
        reasons = [] if current == preferred else [f"sharing rate {sharing_rate(ctx.scenario):.2f} favours "
                                                     f"{preferred} (casebook case 2)"]
        reasons += [f"SMG's {policy}: {why}" for policy, why in smg.items()]
        return Applicability(True, f"The router uses {current}; " + "; ".join(reasons) + ".")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        compare = _compared(ctx)
        if _single_unified(ctx) and (ranks := _dp_ranks(ctx)):
            tp = main_server(ctx.scenario).tp_size
            out = []
            for policy in compare:
                split = replica_split(ctx.scenario, tp, policy)
                out.append(ConfigDelta(technique=self.name, summary=f"TP{tp} x {ranks} + {policy} router (from "
                                                                    f"dp-size {ranks}){router_note(split.router)}",
                                       deployment=split))
            return out
        if _single_unified(ctx):
            return _split_candidates(ctx, compare)[0]
        router = ctx.scenario.deployment.router
        if router is None:
            return []
        workers = sum(g.replicas for g in ctx.scenario.deployment.groups)
        out = []
        for policy in compare:
            if policy == router.policy:
                continue
            changed = fit_balance(msgspec.structs.replace(router, policy=policy), ctx.scenario, workers)
            out.append(ConfigDelta(technique=self.name, summary=f"router policy {policy}{router_note(changed, router)}",
                                   router=changed))
        return out


def _dp_ranks(ctx: TuningContext) -> int:
    """The data-parallel ranks of a plain `--dp-size` server (no DP attention), 0 for any other."""
    server = main_server(ctx.scenario)
    return server.dp_size if server.dp_size > 1 and server.attention_dp_size <= 1 else 0


def _compared(ctx: TuningContext) -> list[str]:
    """The router policies to compare: the playbook's `compare` option, else the casebook's and SMG's."""
    return [str(p) for p in ctx.options.get("compare", [])] or [preferred_policy(ctx), *smg_policies(ctx)]
