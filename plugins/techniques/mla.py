"""DP attention for an MLA model on one node: the casebook's case 5 argument without the 16-GPU scale.

MLA compresses each token's KV into one latent shared by every head, so a TP instance holds the whole
latent on every rank: eight H200s carry eight copies of each token's KV. `--enable-dp-attention` gives each
attention rank its own requests and their KV (casebook case 5 round 1: "Prevents replication of
MLA-compressed KV", so a GPU serves more requests and waits in the queue shrink). That holds inside one node;
the casebook's scale rule is about EP's all-to-all and PD's transfers. DeepSeek-V3 in FP8 as TP8 on one H200
node at 512 clients keeps 232 requests queued at token_usage 0.81.
"""

from __future__ import annotations

from plugins.techniques._rules import main_server, running_cap
from plugins.techniques.batch_parameters import CAP_BINDS, ROOMY_TOKEN_USAGE
from service import AttentionKind, ConfigDelta, TuningContext


def mla_pool_bound(ctx: TuningContext) -> str | None:
    """Why DP attention pays on this MLA instance (its KV pool, replicated per rank, queues requests), else
    None: not MLA, not one plain TP instance inside a node (DP attention, dp-size, pipeline stages, several
    groups or replicas), or no measured queue the pool causes (a running cap, SGLang's reset under
    speculation included, is scheduling_limits' to raise)."""
    scenario, baseline = ctx.scenario, ctx.baseline
    server = main_server(scenario)
    groups = scenario.deployment.groups
    one_instance = len(groups) == 1 and groups[0].role == "unified" and groups[0].replicas == 1
    plain_tp = server.dp_size <= 1 and server.pp_size <= 1 and server.attention_dp_size <= 1
    if ctx.model.attention is not AttentionKind.MLA or not one_instance or not plain_tp or server.tp_size < 2 \
            or server.tp_size > scenario.hardware.gpus_per_node or baseline is None:
        return None
    metrics = baseline.server
    cap, _ = running_cap(server)  # SGLang's own reset under speculation counts as a cap
    if metrics.num_queue_reqs < 1 or metrics.token_usage < ROOMY_TOKEN_USAGE \
            or (cap and metrics.num_running_reqs >= CAP_BINDS * cap):
        return None
    return (f"{ctx.model.name} keeps its MLA latent KV on every one of the TP{server.tp_size} ranks, and "
            f"{metrics.num_queue_reqs:.0f} requests queue at token_usage {metrics.token_usage:.2f}: DP attention "
            "gives each rank its own requests' KV (casebook case 5: 'Prevents replication of MLA-compressed KV', "
            "more requests per GPU, shorter queue waits); inside one node, no all-to-all crosses a network.")


def dp_attention(ctx: TuningContext) -> ConfigDelta:
    """DP attention over every rank of the instance, its TP and experts as they are."""
    tp = main_server(ctx.scenario).tp_size
    return ConfigDelta(technique="moe_parallelism", summary=f"DP attention {tp} (MLA KV not replicated)",
                       set_server={"attention_dp_size": tp}, roles=["unified"])
