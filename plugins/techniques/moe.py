"""Large-scale MoE: expert parallelism with DP attention, EPLB, and prefill/decode disaggregation."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from plugins.techniques._rules import main_server
from service import (
    Applicability,
    ConfigDelta,
    Deployment,
    RouterConfig,
    Scenario,
    ServerConfig,
    Technique,
    TuningContext,
    WorkerGroup,
)

# Casebook "GPU Scale": below 16 GPUs tune a single node; PD disaggregation is detrimental there.
MIN_SCALE_GPUS = 16
EXPERTS_PER_GPU = 8  # case 5: 32 GPUs hold 256 experts, 8 each
GPUS_PER_DP_GROUP = 4  # case 5: --dp-size 8 over 32 GPUs
BOOTSTRAP_PORT = 8998


def _scale_reason(scenario: Scenario) -> str | None:
    gpus = scenario.hardware.total_gpus
    if gpus < MIN_SCALE_GPUS:
        return f"{gpus} GPUs is below the casebook's 16-GPU scale, where this is detrimental."
    return None


def ep_instance_gpus(ctx: TuningContext) -> int:
    """GPUs per EP instance: 8 experts per GPU, in whole nodes, no more than the cluster has."""
    per_node = ctx.scenario.hardware.gpus_per_node
    want = max(per_node, ctx.model.num_experts // EXPERTS_PER_GPU)
    want = -(-want // per_node) * per_node
    return min(want, ctx.scenario.hardware.total_gpus)


def ep_server(server: ServerConfig, gpus: int) -> ServerConfig:
    """One EP domain over `gpus`: TP = EP = `gpus`, attention data-parallel in groups of 4 GPUs.

    The casebook's `--enable-ep-moe` is gone from SGLang 0.5.9 on; its replacement is `--ep-size` with an
    all-to-all backend (`service/sglang/replacements.py`), DeepEP for an EP domain spanning nodes.
    """
    return msgspec.structs.replace(server, tp_size=gpus, ep_size=gpus, moe_a2a_backend="deepep",
                                   attention_dp_size=max(1, gpus // GPUS_PER_DP_GROUP))


class MoeParallelism(Technique):
    """EP + DP attention instances (case 5 round 1), then EPLB with redundant experts (round 2)."""

    name: ClassVar[str] = "moe_parallelism"
    rank: ClassVar[int] = 8
    description: ClassVar[str] = ("Whole experts per GPU with all-to-all instead of fragmented expert weights; "
                                  "then EPLB replicates hot experts (case 5: 7.2x -> 1.9x imbalance).")

    def applicable(self, ctx: TuningContext) -> Applicability:
        if not ctx.model.is_moe:
            return Applicability(False, "The model is dense; expert parallelism needs experts.")
        too_small = _scale_reason(ctx.scenario)
        if too_small:
            return Applicability(False, too_small)
        server = main_server(ctx.scenario)
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
        server = main_server(ctx.scenario)
        if server.ep_size <= 1:
            gpus = ep_instance_gpus(ctx)
            group = ctx.scenario.deployment.groups[0]
            replicas = max(1, ctx.scenario.hardware.total_gpus // gpus)
            worker = msgspec.structs.replace(group, replicas=replicas, server=ep_server(server, gpus))
            deployment = msgspec.structs.replace(ctx.scenario.deployment, groups=[worker])
            return [ConfigDelta(technique=self.name,
                                summary=f"EP{gpus} + DP attention {gpus // GPUS_PER_DP_GROUP} x {replicas}",
                                deployment=deployment)]
        return [ConfigDelta(technique=self.name, summary=f"EPLB deepseek, {server.ep_size} redundant experts",
                            set_server={"enable_eplb": True, "eplb_algorithm": "deepseek",
                                        "eplb_rebalance_num_iterations": 500,
                                        "ep_num_redundant_experts": server.ep_size},
                            roles=["unified", "decode"])]


def pd_deployment(scenario: Scenario, prefill_nodes: int) -> Deployment:
    """Prefill nodes as TP8 instances, the rest one EP decode domain (casebook case 5 round 3)."""
    hw = scenario.hardware
    base = main_server(scenario)
    decode_gpus = (hw.nodes - prefill_nodes) * hw.gpus_per_node
    transfer: dict[str, object] = {"disaggregation_transfer_backend": "mooncake"}
    if hw.interconnect.lower().startswith("ib"):
        transfer["disaggregation_ib_device"] = "mlx5_0"
    prefill = msgspec.structs.replace(
        base, tp_size=hw.gpus_per_node, ep_size=1, moe_a2a_backend=None, attention_dp_size=1, enable_eplb=False, eplb_algorithm=None,
        eplb_rebalance_num_iterations=None, ep_num_redundant_experts=None, chunked_prefill_size=16384,
        mem_fraction_static=0.85, max_running_requests=None, **transfer)
    decode = msgspec.structs.replace(
        ep_server(base, decode_gpus), max_running_requests=2048, mem_fraction_static=0.90, **transfer,
        ep_num_redundant_experts=decode_gpus if base.enable_eplb else base.ep_num_redundant_experts)
    router = scenario.deployment.router or RouterConfig()
    router = msgspec.structs.replace(router, prefill_policy="cache_aware", decode_policy="power_of_two")
    return Deployment(router=router, groups=[
        WorkerGroup(name="prefill", role="prefill", replicas=prefill_nodes, bootstrap_port=BOOTSTRAP_PORT,
                    base_port=scenario.deployment.groups[0].base_port, server=prefill),
        WorkerGroup(name="decode", role="decode", replicas=1, base_port=scenario.deployment.groups[0].base_port,
                    server=decode)])


def first_prefill_nodes(nodes: int) -> int:
    """A third of the nodes for prefill: case 5 starts at 5 of 16 for a 3,000:800 input:output ratio."""
    return max(1, nodes // 3)


class PdDisaggregation(Technique):
    """Separate prefill and decode pools, then sweep the node split while each shift is kept."""

    name: ClassVar[str] = "pd_disaggregation"
    rank: ClassVar[int] = 8
    description: ClassVar[str] = ("Prefill is compute-bound and decode memory-bound; separate pools get their "
                                  "own settings, and the node split trades TTFT against ITL (case 5).")

    def applicable(self, ctx: TuningContext) -> Applicability:
        too_small = _scale_reason(ctx.scenario)
        if too_small:
            return Applicability(False, too_small)
        if ctx.scenario.hardware.nodes < 2:
            return Applicability(False, "One node cannot hold two pools worth separating.")
        if ctx.scenario.deployment.is_pd:
            return Applicability(True, "The prefill/decode node split is the knob that trades TTFT against ITL; "
                                       "shift nodes while throughput rises and the ITL SLO holds (case 5 round 4).")
        return Applicability(True, f"{ctx.scenario.hardware.total_gpus} GPUs is the casebook's scale for PD "
                                   "disaggregation: each pool gets its opposite optimum (case 5 round 3).")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        """The first split; from it the casebook's sweep as alternatives; from a better split, its neighbours.

        Casebook case 5 round 4 tabulates 6/10, 7/9 and 8/8 against 5/11 and keeps the best that holds the
        ITL SLO (8/8 breaks it). Each split is judged against the same accepted split; a winner's untried
        neighbours follow while a shift keeps paying.
        """
        nodes = ctx.scenario.hardware.nodes
        first = first_prefill_nodes(nodes)
        if not ctx.scenario.deployment.is_pd:
            return [self._split(ctx, first)]
        prefill = next(g.replicas for g in ctx.scenario.deployment.groups if g.role == "prefill")
        if prefill == first:
            steps = [prefill + 1, prefill + 2, prefill + 3, prefill - 1]
        else:
            steps = [prefill + 1, prefill - 1]
        return [self._split(ctx, p) for p in steps if 1 <= p < nodes]

    def _split(self, ctx: TuningContext, prefill_nodes: int) -> ConfigDelta:
        nodes = ctx.scenario.hardware.nodes
        return ConfigDelta(technique=self.name, summary=f"PD prefill {prefill_nodes} / decode {nodes - prefill_nodes}",
                           deployment=pd_deployment(ctx.scenario, prefill_nodes))
