"""Large-scale MoE: expert parallelism with DP attention, EPLB, and prefill/decode disaggregation."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import msgspec

from plugins.techniques._rules import (
    TWO_BATCH_OVERLAP,
    at_tp,
    fit_balance,
    main_server,
    router_note,
    router_ports,
    without_ep,
    without_router,
)
from plugins.techniques.mla import dp_attention, mla_pool_bound
from plugins.techniques.parallelism import preferred_policy
from service import (
    Applicability,
    AttentionKind,
    ConfigDelta,
    Deployment,
    Hardware,
    RouterConfig,
    Scenario,
    ServerConfig,
    ServerStartError,
    Technique,
    TuningContext,
    WorkerGroup,
    resolve_server,
    server_starts,
)

# Casebook "GPU Scale": below 16 GPUs tune a single node; PD disaggregation is detrimental there.
MIN_SCALE_GPUS = 16
EXPERTS_PER_GPU = 8  # case 5: 32 GPUs hold 256 experts, 8 each
GPUS_PER_DP_GROUP = 4  # case 5: --dp-size 8 over 32 GPUs
BOOTSTRAP_PORT = 8998
MIN_DECODE_NODES = 4  # a decode EP domain no narrower than one case-5 EP instance (32 GPUs)


def _scale_reason(scenario: Scenario) -> str | None:
    gpus = scenario.hardware.total_gpus
    if gpus < MIN_SCALE_GPUS:
        return f"{gpus} GPU{'' if gpus == 1 else 's'} is below the casebook's 16-GPU scale, where this is detrimental."
    return None


def ep_instance_gpus(ctx: TuningContext) -> int:
    """GPUs per EP instance: 8 experts per GPU, in whole nodes, no more than the cluster has."""
    per_node = ctx.scenario.hardware.gpus_per_node
    want = max(per_node, ctx.model.num_experts // EXPERTS_PER_GPU)
    want = -(-want // per_node) * per_node
    return min(want, ctx.scenario.hardware.total_gpus)


def ep_server(server: ServerConfig, gpus: int, overlap: bool | None = None) -> ServerConfig:
    """One EP domain over `gpus`: TP = EP = `gpus`, attention data-parallel in groups of 4 GPUs.

    The casebook's `--enable-ep-moe` only set ep_size = tp_size and chose no all-to-all, so SGLang gathered
    every rank's tokens onto each GPU (`aic_engines.gathers_moe_input`); the all-to-all the casebook
    describes is `--moe-a2a-backend deepep`, set here for an EP domain spanning nodes. With
    `overlap`, `--enable-two-batch-overlap` runs one micro-batch's all-to-all under the other's math
    (`batch_overlap/two_batch_overlap.py`); None keeps what `server` has.
    """
    extra = dict(server.extra)
    if overlap is not None:
        extra.pop(TWO_BATCH_OVERLAP, None)
        if overlap:
            extra[TWO_BATCH_OVERLAP] = True
    return msgspec.structs.replace(server, tp_size=gpus, pp_size=1, dp_size=1, ep_size=gpus, moe_a2a_backend="deepep",
                                   attention_dp_size=max(1, gpus // GPUS_PER_DP_GROUP), extra=extra)


class MoeParallelism(Technique):
    """EP + DP attention instances (case 5 round 1), then EPLB with redundant experts (round 2)."""

    name: ClassVar[str] = "moe_parallelism"
    rank: ClassVar[int] = 8
    description: ClassVar[str] = ("Whole experts per GPU with all-to-all instead of fragmented expert weights; "
                                  "then EPLB replicates hot experts (case 5: 7.2x -> 1.9x imbalance).")

    def applicable(self, ctx: TuningContext) -> Applicability:
        server = main_server(ctx.scenario)
        too_small = _scale_reason(ctx.scenario)
        if too_small and _expert_layout(server) and not _mla_dp_only(ctx, server):
            # A start that already runs the large-scale layout where the casebook calls it detrimental: the
            # plain TP instance on the same GPUs is the comparison an engineer makes first.
            return Applicability(True, f"{_expert_layout(server)} on {too_small[0].lower()}{too_small[1:-1]}; "
                                       "measure the same GPUs as a plain TP instance.")
        if not ctx.model.is_moe:
            return Applicability(False, "The model is dense; expert parallelism needs experts.")
        if too_small and (why := mla_pool_bound(ctx)):
            return Applicability(True, why)
        if too_small:
            return Applicability(False, too_small)
        if server.ep_size <= 1:
            return Applicability(True, f"TP fragments each of {ctx.model.num_experts} experts over every GPU; EP "
                                       "keeps experts whole and DP attention stops KV replication (case 5).")
        if not server.enable_eplb:
            imbalance = ctx.baseline.expert_imbalance if ctx.baseline else None
            seen = f" (expert load max/avg {imbalance:.1f}x)" if imbalance else ""
            return Applicability(True, f"The busiest expert's GPU sets the pace{seen}; EPLB replicates hot "
                                       "experts (casebook case 5 round 2).")
        return Applicability(False, "EP, DP attention and EPLB are already on.")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        """EP + DP attention, as the casebook's round 1 and with two-batch overlap; then EPLB.

        The two EP layouts are alternatives judged against the same TP baseline: DeepEP's all-to-all crosses
        InfiniBand between the instance's four nodes on every MoE layer, and SGLang's large-scale EP
        deployments hide it behind the other micro-batch's math (`--enable-two-batch-overlap`).
        """
        server = main_server(ctx.scenario)
        layout = _expert_layout(server)
        if _scale_reason(ctx.scenario) and mla_pool_bound(ctx):
            return [dp_attention(ctx)]
        if _scale_reason(ctx.scenario) and layout and not _mla_dp_only(ctx, server):
            return [ConfigDelta(technique=self.name, summary=f"plain TP{server.tp_size}: {layout} off (below the "
                                                             f"casebook's {MIN_SCALE_GPUS}-GPU scale)",
                                deployment=_map_servers(ctx.scenario.deployment, without_ep), simplifies=True)]
        if server.ep_size <= 1:
            return [self._ep(ctx, overlap) for overlap in (False, True)]
        # Redundant experts as many as the EP ranks (casebook case 5), or the fewest above that still split the
        # experts evenly over them (a PD decode domain of EP88 carrying 256 experts takes 96).
        spare = redundant_experts(ctx.model.num_experts, server.ep_size, server.ep_size)
        return [ConfigDelta(technique=self.name, summary=f"EPLB deepseek, {spare} redundant experts",
                            set_server={"enable_eplb": True, "eplb_algorithm": "deepseek",
                                        "eplb_rebalance_num_iterations": 500,
                                        "ep_num_redundant_experts": spare},
                            roles=["unified", "decode"])]

    def _ep(self, ctx: TuningContext, overlap: bool) -> ConfigDelta:
        if ctx.scenario.deployment.is_pd:
            return self._ep_decode_pool(ctx, overlap)
        gpus = _pool_ep_size(ctx, ctx.scenario.hardware.total_gpus, ep_instance_gpus(ctx))
        group = ctx.scenario.deployment.groups[0]
        replicas = max(1, ctx.scenario.hardware.total_gpus // gpus)
        server = ep_server(main_server(ctx.scenario), gpus, overlap)
        summary = f"EP{gpus} + DP attention {gpus // GPUS_PER_DP_GROUP} x {replicas}"
        cap = server.max_running_requests
        if cap and group.replicas != replicas:
            # A running cap sized for each of the current instances' share of the clients: the EP instances
            # take the same clients in fewer, wider instances (two TP8 replicas capped at 64 merged into one
            # EP16 instance at 64 left half the clients queued, p95 TTFT 12.6 -> 28 s).
            cap = -(-cap * group.replicas // replicas)
            server = msgspec.structs.replace(server, max_running_requests=cap)
            summary += (f", max-running-requests {cap} (the {group.replicas} instances' caps together)"
                        if group.replicas > replicas else
                        f", max-running-requests {cap} (the cap shared over {replicas} instances)")
        worker = msgspec.structs.replace(group, replicas=replicas, server=server)
        deployment = msgspec.structs.replace(ctx.scenario.deployment, groups=[worker])
        if replicas == 1 and deployment.router is not None:
            # Two TP8 replicas behind power_of_two merged into one EP16 instance were refused before launch.
            deployment = without_router(deployment, worker)
            summary += ", no router"
        return ConfigDelta(technique=self.name, summary=summary + (", two-batch overlap" if overlap else ""),
                           deployment=deployment)


    def _ep_decode_pool(self, ctx: TuningContext, overlap: bool) -> ConfigDelta:
        """EP on a PD deployment's decode pool, its GPUs regrouped into EP instances; the prefill pool keeps its
        plain TP (casebook case 5: "No EP DP arguments: Prefill has small batches, so the benefits of
        large-scale EP are not realized")."""
        groups, parts = [], []
        for group in ctx.scenario.deployment.groups:
            if group.role != "decode":
                groups.append(group)
                continue
            pool = group.replicas * group.server.world_size
            gpus = _pool_ep_size(ctx, pool, group.server.world_size)
            replicas = max(1, pool // gpus)
            server = ep_server(group.server, gpus, overlap)
            if server.max_running_requests and group.replicas != replicas:
                server = msgspec.structs.replace(
                    server, max_running_requests=-(-server.max_running_requests * group.replicas // replicas))
            groups.append(msgspec.structs.replace(group, replicas=replicas, server=server))
            parts.append(f"decode pool as EP{gpus} + DP attention {gpus // GPUS_PER_DP_GROUP} x {replicas}")
        deployment = msgspec.structs.replace(ctx.scenario.deployment, groups=groups)
        summary = "; ".join(parts) + ", prefill pool unchanged" + (", two-batch overlap" if overlap else "")
        return ConfigDelta(technique=self.name, summary=summary, deployment=deployment)


def _pool_ep_size(ctx: TuningContext, pool: int, current: int) -> int:
    """The widest EP instance, up to `ep_instance_gpus`, that splits a pool of `pool` GPUs into whole instances
    and the experts evenly (DeepEP asserts `num_experts % group.size() == 0`, `token_dispatcher/deepep.py`):
    a 24-GPU decode pool of a 256-expert model is three EP8 instances, not one EP24; else `current`."""
    widest, per_node, experts = ep_instance_gpus(ctx), ctx.scenario.hardware.gpus_per_node, ctx.model.num_experts
    fits = [g for g in range(min(widest, pool), 0, -1)
            if pool % g == 0 and (g % per_node == 0 or g == pool) and (not experts or experts % g == 0)]
    return fits[0] if fits else current


def _mla_dp_only(ctx: TuningContext, server: ServerConfig) -> bool:
    """DP attention alone on an MLA model: the KV layout `mla.py` sets below scale, not a large-scale one."""
    return ctx.model.attention is AttentionKind.MLA and server.attention_dp_size > 1 and server.ep_size <= 1 \
        and not server.enable_eplb


def _expert_layout(server: ServerConfig) -> str:
    """The large-scale settings `server` runs ("EP2 + EPLB"), or "" when it runs none."""
    parts = [f"EP{server.ep_size}"] if server.ep_size > 1 else []
    parts += ["EPLB"] if server.enable_eplb else []
    parts += [f"DP attention {server.attention_dp_size}"] if server.attention_dp_size > 1 else []
    parts += ["two-batch overlap"] if server.extra.get(TWO_BATCH_OVERLAP) else []
    return " + ".join(parts)


def _map_servers(deployment: Deployment, change: Callable[[ServerConfig], ServerConfig]) -> Deployment:
    groups = [msgspec.structs.replace(g, server=change(g.server)) for g in deployment.groups]
    return msgspec.structs.replace(deployment, groups=groups)


def prefill_server(base: ServerConfig, gpus_per_node: int, dp_attention: bool) -> ServerConfig:
    """One prefill node: TP8 without EP (casebook case 5 round 3), or DP attention with EP inside the node.

    The casebook's prefill node drops EP and DP arguments. The alternative is the layout SGLang's own
    large-scale prefill runs: each GPU attends for its own requests (`--enable-dp-attention`, chunk
    `chunked_prefill_size // dp`) and experts stay whole with DeepEP over NVLink, so no activation all-reduce
    over the node per layer and no InfiniBand all-to-all.
    """
    prefill = msgspec.structs.replace(
        without_ep(base), tp_size=gpus_per_node, pp_size=1, dp_size=1, chunked_prefill_size=16384,
        mem_fraction_static=0.85, max_running_requests=None)
    if not dp_attention:
        return prefill
    return msgspec.structs.replace(prefill, ep_size=gpus_per_node, moe_a2a_backend="deepep",
                                   attention_dp_size=gpus_per_node, extra=dict(base.extra))


def _transfer(hardware: Hardware) -> dict[str, object]:
    """KV transfer settings of both pools: Mooncake, over the InfiniBand device where the nodes have one."""
    transfer: dict[str, object] = {"disaggregation_transfer_backend": "mooncake"}
    if hardware.interconnect.lower().startswith(("ib", "infiniband")):
        transfer["disaggregation_ib_device"] = "mlx5_0"
    return transfer


def redundant_experts(experts: int, ep: int, at_least: int) -> int:
    """The fewest redundant experts, `at_least` or more, that make the physical experts split evenly over `ep`
    ranks (SGLang's FusedMoE asserts it): 256 experts over EP88 with at least 88 -> 96 (352 = 4 x 88)."""
    return at_least + (-(experts + at_least)) % ep if experts and ep > 1 else at_least


def pd_deployment(scenario: Scenario, experts: int, prefill_nodes: int, dp_attention_prefill: bool = False) -> Deployment:
    """Prefill nodes as one-node instances, the rest one EP decode domain (casebook case 5 round 3).

    The casebook matches the redundant experts to the EP size (`--ep-num-redundant-experts 88` for EP88), but
    256 + 88 experts do not split over 88 ranks and SGLang refuses to load them; the decode domain takes the
    fewest at or above the EP size that split evenly (96), or without EPLB the fewest that do (8).
    """
    hw = scenario.hardware
    base = main_server(scenario)
    decode_gpus = (hw.nodes - prefill_nodes) * hw.gpus_per_node
    transfer = _transfer(hw)
    prefill = msgspec.structs.replace(prefill_server(base, hw.gpus_per_node, dp_attention_prefill), **transfer)
    floor = decode_gpus if base.enable_eplb else (base.ep_num_redundant_experts or 0)
    redundant = redundant_experts(experts, decode_gpus, floor)
    decode = msgspec.structs.replace(
        ep_server(base, decode_gpus), max_running_requests=2048, mem_fraction_static=0.90, **transfer,
        ep_num_redundant_experts=redundant or base.ep_num_redundant_experts)
    router, port = router_ports(scenario.deployment)
    router = msgspec.structs.replace(router, prefill_policy="cache_aware", decode_policy="power_of_two")
    return Deployment(router=router, groups=[
        WorkerGroup(name="prefill", role="prefill", replicas=prefill_nodes, bootstrap_port=BOOTSTRAP_PORT,
                    base_port=port, server=prefill),
        WorkerGroup(name="decode", role="decode", replicas=1, base_port=port, server=decode)])


def instance_pd_deployment(scenario: Scenario, prefill_instances: int) -> Deployment:
    """A dense model's PD: the workers' own TP instances, `prefill_instances` of them prefill and the rest decode.

    A dense model has no experts to spread, so the casebook's node-wide prefill TP8 and EP decode domain (case
    5) do not apply: a 27B prefills no faster as one TP8 server than as two TP4 servers, and EP and DeepEP on a
    model without experts are flags an engineer would not ship. Each pool keeps the instance the deployment
    runs; the split is the knob (case 5 round 4), in instances rather than nodes.
    """
    hw = scenario.hardware
    base, instances = _pd_instances(scenario)
    server = msgspec.structs.replace(base, max_running_requests=None, **_transfer(hw))
    router, port = router_ports(scenario.deployment)
    router = msgspec.structs.replace(router, prefill_policy="cache_aware", decode_policy="power_of_two")
    return Deployment(router=router, groups=[
        WorkerGroup(name="prefill", role="prefill", replicas=prefill_instances, bootstrap_port=BOOTSTRAP_PORT,
                    base_port=port, server=server),
        WorkerGroup(name="decode", role="decode", replicas=instances - prefill_instances,
                    base_port=port + prefill_instances, server=server)])


def _pd_instances(scenario: Scenario) -> tuple[ServerConfig, int]:
    """A dense model's PD instance and how many fit the GPUs the deployment runs on (PD adds none); one instance
    over the nodes (TP16 on two nodes) leaves no pools to split, so instances are cut to a node."""
    gpus = scenario.deployment.total_gpus()
    base = without_ep(main_server(scenario))
    if base.world_size > scenario.hardware.gpus_per_node or gpus // base.world_size < 2:
        base = at_tp(base, min(scenario.hardware.gpus_per_node, max(gpus // 2, 1)))
    return base, gpus // max(base.world_size, 1)


def _instance_unfit(ctx: TuningContext) -> str:
    """Why a dense model's deployment has no two PD pools to split into (its instance, cut to a node, does not
    start, or only one fits the GPUs), else ""."""
    server, instances = _pd_instances(ctx.scenario)
    if not server_starts(ctx.model, ctx.scenario.hardware, server):
        return (f"Two pools need two instances, and {ctx.model.name} does not start on a node's "
                f"{server.world_size} GPUs (TP{server.tp_size}): its {ctx.scenario.deployment.total_gpus()} GPUs "
                "hold one instance.")
    if instances < 2:
        return f"The {ctx.scenario.deployment.total_gpus()} GPUs hold one TP{server.tp_size} instance: no two pools."
    return ""


def _prefill_node_unfit(ctx: TuningContext) -> str:
    """Why a MoE model's pools cannot be whole nodes (the casebook's prefill node does not start), else ""."""
    hardware = ctx.scenario.hardware
    node = prefill_server(main_server(ctx.scenario), hardware.gpus_per_node, False)
    try:
        resolve_server(ctx.model, hardware, node)
    except ServerStartError as exc:
        return (f"PD pools are whole nodes, and {ctx.model.name} does not start on one node as the casebook's "
                f"prefill node (TP{node.tp_size}, mem-fraction-static {node.mem_fraction_static:g}): {exc}. "
                f"Its {hardware.nodes} nodes hold no prefill node beside a decode pool.")
    return ""


def _shifted(scenario: Scenario, towards_prefill: int) -> ConfigDelta | None:
    """A dense PD deployment with one instance's worth of GPUs moved between the pools (+1: to prefill), each
    pool keeping its own servers (their TP, chunk, running cap); None when a pool would empty or the GPUs do
    not divide into the other pool's instances."""
    deployment = scenario.deployment
    prefill = next(g for g in deployment.groups if g.role == "prefill")
    decode = next(g for g in deployment.groups if g.role == "decode")
    p_tp, d_tp = prefill.server.world_size, decode.server.world_size
    step = max(p_tp, d_tp)  # GPUs moved: one instance of the wider pool
    if step % p_tp or step % d_tp:
        return None
    p = prefill.replicas + towards_prefill * step // p_tp
    d = decode.replicas - towards_prefill * step // d_tp
    if p < 1 or d < 1:
        return None
    moved_prefill = msgspec.structs.replace(prefill, replicas=p)
    decode_port = decode.base_port
    if prefill.base_port <= decode.base_port < prefill.base_port + p:
        decode_port = prefill.base_port + p  # the grown prefill pool's ports run into decode's
    moved_decode = msgspec.structs.replace(decode, replicas=d, base_port=decode_port)
    groups = [moved_prefill if g is prefill else moved_decode if g is decode else g for g in deployment.groups]
    tps = f"TP{prefill.server.tp_size}" if p_tp == d_tp else f"TP{prefill.server.tp_size}/TP{decode.server.tp_size}"
    return ConfigDelta(technique=PdDisaggregation.name, summary=f"PD prefill {p} / decode {d} ({tps} instances)",
                       deployment=msgspec.structs.replace(deployment, groups=groups))


def first_prefill_instances(instances: int) -> list[int]:
    """Prefill shares to measure first for a dense model's PD, as alternatives: a quarter to three quarters of
    the instances (case 5 starts at about a third for 3,000:800 tokens; prefill-heavy traffic needs more)."""
    shares = (instances // 4, instances // 3, instances // 2, 2 * instances // 3, 3 * instances // 4)
    return sorted({p for p in shares if 1 <= p < instances}) or [1]


def _pd_too_small(scenario: Scenario) -> str | None:
    if scenario.hardware.nodes < 2:
        return _scale_reason(scenario) or "One node cannot hold two pools worth separating."
    return _scale_reason(scenario)


def unified_replicas(ctx: TuningContext) -> ConfigDelta:
    """A PD deployment's GPUs as unified replicas of the decode server at its TP, behind the router.

    The decode server carries the settings that hold requests to the end (KV pool, running cap, speculation);
    the transfer settings go, and the router takes the casebook's policy for the traffic (case 2).
    """
    deployment = ctx.scenario.deployment
    decode = next(g for g in deployment.groups if g.role == "decode")
    tp = decode.server.tp_size
    server = msgspec.structs.replace(decode.server, disaggregation_transfer_backend=None,
                                     disaggregation_ib_device=None)
    replicas = max(1, deployment.total_gpus() // server.world_size)
    policy = preferred_policy(ctx)
    router = deployment.router or RouterConfig()
    router = fit_balance(msgspec.structs.replace(router, policy=policy, prefill_policy=None, decode_policy=None),
                         ctx.scenario, replicas)
    first = min(g.base_port for g in deployment.groups)
    worker = WorkerGroup(name="worker", role="unified", replicas=replicas, base_port=first, server=server)
    return ConfigDelta(technique=PdDisaggregation.name,
                       summary=f"no PD: TP{tp} x {replicas} unified + {policy} router{router_note(router)} (below "
                               f"the casebook's {MIN_SCALE_GPUS}-GPU scale)",
                       deployment=Deployment(groups=[worker], router=router), simplifies=True)


def first_prefill_nodes(nodes: int) -> int:
    """A third of the nodes for prefill: case 5 starts at 5 of 16 for a 3,000:800 input:output ratio."""
    return max(1, nodes // 3)


class PdDisaggregation(Technique):
    """Separate prefill and decode pools, then sweep the node split while each shift is kept."""

    name: ClassVar[str] = "pd_disaggregation"
    rank: ClassVar[int] = 8
    description: ClassVar[str] = ("Prefill is compute-bound and decode memory-bound; separate pools get their "
                                  "own settings, and the node split trades TTFT against ITL (case 5).")
    stepwise: ClassVar[bool] = True

    def applicable(self, ctx: TuningContext) -> Applicability:
        too_small = _pd_too_small(ctx.scenario)
        if too_small and ctx.scenario.deployment.is_pd:
            # Started disaggregated where the casebook calls it detrimental: the same GPUs as unified replicas
            # is the comparison to make, and no other technique re-cuts a PD deployment.
            return Applicability(True, f"The deployment is disaggregated, but {too_small[0].lower()}"
                                       f"{too_small[1:-1]}; measure the same GPUs as unified replicas.")
        if too_small:
            return Applicability(False, too_small)
        if ctx.scenario.deployment.is_pd:
            return Applicability(True, "The prefill/decode node split is the knob that trades TTFT against ITL; "
                                       "shift nodes while throughput rises and the ITL SLO holds (case 5 round 4).")
        if not ctx.model.is_moe and (unfit := _instance_unfit(ctx)):
            return Applicability(False, unfit)
        if ctx.model.is_moe and (unfit := _prefill_node_unfit(ctx)):
            return Applicability(False, unfit)
        return Applicability(True, f"{ctx.scenario.hardware.total_gpus} GPUs is the casebook's scale for PD "
                                   "disaggregation: each pool gets its opposite optimum (case 5 round 3).")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        """Splits to try one at a time, each judged against the last accepted deployment.

        Before a split is kept: the casebook's first split with TP8 prefill nodes (round 3), then
        DP-attention prefill nodes with EP inside the node from that split towards prefill. Once a split is
        kept, its neighbours, as round 4 shifts nodes while a shift keeps paying and the ITL SLO holds.
        """
        nodes = ctx.scenario.hardware.nodes
        if ctx.scenario.deployment.is_pd and _pd_too_small(ctx.scenario):
            return [unified_replicas(ctx)]
        if not ctx.model.is_moe:
            return self._instance_splits(ctx)
        first = first_prefill_nodes(nodes)
        if not ctx.scenario.deployment.is_pd:
            # Until a split is kept: the casebook's first split, then DP-attention prefill nodes from that split
            # towards prefill, one node at a time, as case 5 round 4 shifts nodes while prefill queues.
            dp_splits = [self._split(ctx, p, True) for p in range(first, nodes - MIN_DECODE_NODES + 1)]
            return [self._split(ctx, first, False), *dp_splits]
        prefill_group = next(g for g in ctx.scenario.deployment.groups if g.role == "prefill")
        prefill, dp_attention = prefill_group.replicas, prefill_group.server.attention_dp_size > 1
        return [self._split(ctx, p, dp_attention) for p in (prefill + 1, prefill - 1) if 1 <= p < nodes]

    def _instance_splits(self, ctx: TuningContext) -> list[ConfigDelta]:
        """A dense model's splits in instances: several shares at first, measured as alternatives; once a split
        is kept, one instance either way."""
        deployment = ctx.scenario.deployment
        if deployment.is_pd:
            return [d for d in (_shifted(ctx.scenario, +1), _shifted(ctx.scenario, -1)) if d is not None]
        shares = first_prefill_instances(_pd_instances(ctx.scenario)[1])
        out = []
        for p in shares:
            split = instance_pd_deployment(ctx.scenario, p)
            decode = next(g for g in split.groups if g.role == "decode")
            out.append(ConfigDelta(technique=self.name,
                                   summary=f"PD prefill {p} / decode {decode.replicas} (TP{decode.server.tp_size} "
                                           "instances)",
                                   deployment=split))
        return out

    def _split(self, ctx: TuningContext, prefill_nodes: int, dp_attention: bool) -> ConfigDelta:
        nodes = ctx.scenario.hardware.nodes
        layout = f" (DP attention, EP{ctx.scenario.hardware.gpus_per_node})" if dp_attention else ""
        return ConfigDelta(technique=self.name,
                           summary=f"PD prefill {prefill_nodes}{layout} / decode {nodes - prefill_nodes}",
                           deployment=pd_deployment(ctx.scenario, ctx.model.num_experts, prefill_nodes,
                                                    dp_attention))
