"""Replicas for a model the 25%-of-HBM weight rule would keep whole: the KV pool decides (capacity calculation).

A BF16 MoE carries every expert's weights: Qwen3.6-35B-A3B is about 65 GiB, 41% of an 80 GB H100 at TP2, so
the weight rule finds nothing smaller than TP4 on four H100s. Its KV is small, though: at TP2 each instance's
pool holds its 16 clients at the p95 context many times over, so TP2 x 2 is offered; TP1 does not hold them.
"""

from __future__ import annotations

import msgspec

from plugins.techniques import TECHNIQUES, PdDisaggregation, RouterPolicy
from plugins.techniques._rules import kv_need, kv_shortfall, smallest_replica_tp, weight_gb_per_gpu
from service import SLO, Hardware, LengthDist, ServerConfig, WorkloadProfile
from tests.unit.techniques.scenarios import context, deployment, scenario

MOE = "Qwen/Qwen3.6-35B-A3B"
RAG = WorkloadProfile(input=LengthDist(median=8000, p95=14000), output=LengthDist(median=200, p95=500),
                      peak_concurrency=32)
PARALLELISM = next(t for t in TECHNIQUES if t.name == "parallelism")()


def test_a_bf16_moe_whose_weights_fill_the_rule_is_split_where_its_kv_fits() -> None:
    scen = scenario(MOE, "H100-SXM", 4, deployment(MOE, tp=4), clients=32, workload=RAG,
                    slo=SLO(ttft_p95_ms=2000, itl_median_ms=50))
    ctx = context(scen)
    server = scen.deployment.groups[0].server
    assert weight_gb_per_gpu(ctx.model, server, 2) > 0.25 * 80  # the weight rule alone keeps TP4
    assert smallest_replica_tp(ctx.model, scen) == 2
    assert kv_shortfall(ctx.model, scen, ServerConfig(model_path=MOE, tp_size=2), 2) is None
    short = kv_shortfall(ctx.model, scen, ServerConfig(model_path=MOE, tp_size=1), 4)
    assert short is not None and f"{kv_need(scen, 4)[2]:,}" in short  # 8 clients x 14,500 tokens
    assert PARALLELISM.applicable(ctx).applicable
    assert [d.summary for d in PARALLELISM.propose(ctx)] == ["TP2 x 2 + power_of_two router"]


def test_a_dense_model_keeps_the_weight_rule_the_casebook_splits_by() -> None:
    # A 27B in BF16 (50 GiB) as TP4 on four H100s: at TP2 its weights take 31% of a GPU, past the rule's 25%.
    # Its TP2 pool would hold the 16 clients each instance gets, but a dense model's KV grows with its
    # weights, and the casebook's rule keeps TP4 whole: no split is offered.
    dense = "Qwen/Qwen3.6-27B"
    scen = scenario(dense, "H100-SXM", 4, deployment(dense, tp=4), clients=32)
    ctx = context(scen)
    assert weight_gb_per_gpu(ctx.model, scen.deployment.groups[0].server, 2) > 0.25 * 80
    assert kv_shortfall(ctx.model, scen, ServerConfig(model_path=dense, tp_size=2),
                        2) is None
    assert smallest_replica_tp(ctx.model, scen) == 4
    verdict = PARALLELISM.applicable(ctx)
    assert not verdict.applicable
    # The reason gives the figure the rule decides by, not a claim that TP2 would leave no room for KV.
    assert verdict.reason == ("At TP2 the weights would take 25 GiB of each 80 GB GPU (31%), more than the quarter "
                              "the casebook's replica splits leave them (the rest holds long-context KV): TP4 stays "
                              "one instance.")


def test_where_the_kv_rule_decides_the_reason_names_the_pool_or_the_weights() -> None:
    # The MoE on two H100s at 64 clients: TP1 starts, but its pool is short of its 32 clients' p95 context.
    scen = scenario(MOE, "H100-SXM", 2, deployment(MOE, tp=2), clients=64, workload=RAG)
    verdict = PARALLELISM.applicable(context(scen))
    assert not verdict.applicable
    assert verdict.reason.startswith("At TP1 it would not start: ") or (
        verdict.reason.startswith("At TP1 its KV pool of ") and "p95 context of 14,500 tokens" in verdict.reason)
    # The 27B in BF16 on two 48 GB L40S: at TP1 its 50 GiB of weights do not fit one GPU.
    dense = "Qwen/Qwen3.6-27B"
    scen = scenario(dense, "L40S", 2, deployment(dense, tp=2), clients=8)
    verdict = PARALLELISM.applicable(context(scen))
    assert not verdict.applicable
    assert verdict.reason == "At TP1 the weights alone (50 GiB) would not fit a 48 GB GPU: TP2 stays one instance."
    # The 9B in BF16 (17 GiB) as TP2 on two 24 GB L4s: at TP1 more than half of the GPU.
    small = "Qwen/Qwen3.6-9B"
    scen = scenario(small, "L4", 2, deployment(small, tp=2), clients=8)
    verdict = PARALLELISM.applicable(context(scen))
    assert not verdict.applicable
    assert verdict.reason.startswith("At TP1 the weights would take 17 GiB of each 24 GB GPU (")
    assert "more than half, too little left for KV, activations and graphs: TP2 stays one instance." in verdict.reason


def test_without_nvlink_a_dense_model_is_split_where_its_kv_fits_and_half_the_gpu_stays_free() -> None:
    # A 27B in BF16 as TP8 on eight 48 GB L40S (PCIe only): the weight rule leaves TP8 (TP4 is 28% of a GPU), and
    # every layer's all-reduce crosses PCIe. TP4's pool holds its 64 clients at the p95 context: TP4 x 2 is
    # offered; TP2 (27 GB, 56% of a GPU) is not.
    dense = "Qwen/Qwen3.6-27B"
    scen = scenario(dense, "L40S", 8, deployment(dense, tp=8), clients=128,
                    slo=SLO(ttft_p95_ms=3000, itl_median_ms=60))
    ctx = context(scen)
    server = scen.deployment.groups[0].server
    assert weight_gb_per_gpu(ctx.model, server, 4) > 0.25 * 48 and weight_gb_per_gpu(ctx.model, server, 2) > 0.5 * 48
    assert kv_shortfall(ctx.model, scen, ServerConfig(model_path=dense, tp_size=4), 2) is None
    assert smallest_replica_tp(ctx.model, scen) == 4
    assert PARALLELISM.applicable(ctx).applicable
    assert [d.summary for d in PARALLELISM.propose(ctx)] == ["TP4 x 2 + power_of_two router"]


def test_a_model_a_node_cannot_hold_is_not_split_into_node_replicas_nor_pd_pools() -> None:
    # Llama-3.1-405B in BF16 as TP16 on two nodes of H100s: a node holds 94.5 GiB a GPU of weights at TP8, so
    # "TP8 x 2 + cache_aware router" and a TP8 prefill / TP8 decode split were proposed and refused before launch.
    model = "meta-llama/Meta-Llama-3.1-405B"
    scen = scenario(model, "H100-SXM", 8, deployment(model, tp=16), clients=32)
    scen = msgspec.structs.replace(scen, hardware=Hardware(gpu="H100-SXM", gpus_per_node=8, nodes=2))
    ctx = context(scen)
    for technique in (PARALLELISM, RouterPolicy(), PdDisaggregation()):
        verdict = technique.applicable(ctx)
        assert not verdict.applicable, (technique.name, verdict.reason)
    assert PARALLELISM.applicable(ctx).reason == ("At TP8 the weights alone (94 GiB) would not fit a 80 GB GPU: "
                                                  "TP16 stays one instance.")
    assert PdDisaggregation().applicable(ctx).reason.startswith(
        "Two pools need two instances, and meta-llama/Meta-Llama-3.1-405B does not start on a node's 8 GPUs (TP8)")


def test_a_multi_node_moe_whose_node_wide_replica_has_no_room_for_its_load_stays_whole() -> None:
    # Kimi-K2 in FP8 (1T parameters) as TP16 on two H200 nodes at 96 clients: a TP8 replica starts, but its
    # 120 GiB of weights a GPU leave a pool of 104,350 tokens against the 576,000 its 48 requests need at a
    # 12,000-token p95 context. The router split was measured at p95 TTFT 37.6 s; it is no longer proposed.
    kimi = "moonshotai/Kimi-K2-Instruct"
    chat = WorkloadProfile(input=LengthDist(median=3000, p95=10000), output=LengthDist(median=600, p95=2000),
                           peak_concurrency=96)
    scen = msgspec.structs.replace(scenario(kimi, "H200-SXM", 8, deployment(kimi, tp=16), clients=96, workload=chat),
                                   hardware=Hardware(gpu="H200-SXM", gpus_per_node=8, nodes=2))
    ctx = context(scen)
    assert smallest_replica_tp(ctx.model, scen) == 16
    rule = RouterPolicy().applicable(ctx)
    assert not rule.applicable and rule.reason == "Too few GPUs for two replicas, so there is nothing to route."
    short = kv_shortfall(ctx.model, scen, ServerConfig(model_path=kimi, tp_size=8), 2)
    assert short == ("its KV pool of 104,350 tokens per instance is short of the 576,000 that 48 requests at the "
                     "p95 context of 12,000 tokens need")
