"""DP attention for an MLA model whose replicated KV queues requests, inside one node.

DeepSeek-V3 (FP8 checkpoint) as TP8 on one H200 node at 512 clients keeps 232 requests queued at token_usage
0.81: each rank holds every token's MLA latent. The casebook's 16-GPU scale rule kept moe_parallelism off,
and the job ended `slo_not_met` (p95 TTFT 78 s). DP attention 8 (casebook case 5: "Prevents replication of
MLA-compressed KV") serves +203% output tok/s at p95 TTFT 300 ms, simulated. EP and PD stay below scale.
"""

from __future__ import annotations

import msgspec

from plugins.techniques import MoeParallelism
from service import SLO, ServerMetrics

from .scenarios import context, deployment, measured, scenario

MODEL = "deepseek-ai/DeepSeek-V3"


def _node(queue: float, usage: float = 0.81, **server: object):
    scen = scenario(MODEL, "H200-SXM", 8, deployment(MODEL, tp=8, **server), clients=512,
                    slo=SLO(ttft_p95_ms=10000, itl_median_ms=80))
    base = measured(499.0)
    base = msgspec.structs.replace(base, server=ServerMetrics(num_queue_reqs=queue, token_usage=usage,
                                                              num_running_reqs=267))
    return context(scen, baseline=base)


def test_a_queue_behind_replicated_mla_kv_gets_dp_attention_on_one_node() -> None:
    ctx = _node(queue=232)
    applies = MoeParallelism().applicable(ctx)
    assert applies.applicable
    assert "MLA latent KV on every one of the TP8 ranks, and 232 requests queue at token_usage 0.81" in applies.reason
    [delta] = MoeParallelism().propose(ctx)
    assert delta.summary == "DP attention 8 (MLA KV not replicated)"
    assert delta.set_server == {"attention_dp_size": 8} and delta.deployment is None


def test_no_queue_keeps_the_scale_rule_and_a_kept_dp_attention_is_not_undone() -> None:
    idle = MoeParallelism().applicable(_node(queue=0))
    assert not idle.applicable and "below the casebook's 16-GPU scale" in idle.reason
    # DP attention alone on the MLA model is this rule's layout, not a large-scale one to take back.
    kept = _node(queue=0, attention_dp_size=8)
    assert not MoeParallelism().applicable(kept).applicable
    # EP on the same node still is, and its removal keeps nothing of it.
    ep = _node(queue=0, attention_dp_size=8, ep_size=8)
    assert MoeParallelism().applicable(ep).applicable
    [plain] = MoeParallelism().propose(ep)
    assert plain.summary.startswith("plain TP8: EP8 + DP attention 8 off")


def test_a_running_cap_or_more_than_one_instance_is_not_the_pools_queue() -> None:
    # NEXTN with no cap set runs under SGLang's reset of 48: 48 running and a queue is the cap's.
    nextn = _node(queue=232, speculative_algorithm="NEXTN")
    nextn = msgspec.structs.replace(nextn, baseline=msgspec.structs.replace(
        nextn.baseline, server=ServerMetrics(num_queue_reqs=232, token_usage=0.81, num_running_reqs=48)))
    assert not MoeParallelism().applicable(nextn).applicable
    # Two TP4 replicas behind a router: not the one TP instance this rule re-cuts.
    two = _node(queue=232)
    dep = deployment(MODEL, tp=4, replicas=2)
    two = msgspec.structs.replace(two, scenario=msgspec.structs.replace(two.scenario, deployment=dep))
    assert not MoeParallelism().applicable(two).applicable
