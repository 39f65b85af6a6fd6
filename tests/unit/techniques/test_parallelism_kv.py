"""Replicas for a model the 25%-of-HBM weight rule would keep whole: the KV pool decides (capacity calculation).

A BF16 MoE carries every expert's weights: Qwen3.6-35B-A3B is about 65 GiB, 41% of an 80 GB H100 at TP2, so
the weight rule finds nothing smaller than TP4 on four H100s. Its KV is small, though: at TP2 each instance's
pool holds its 16 clients at the p95 context many times over, so TP2 x 2 is offered; TP1 does not hold them.
"""

from __future__ import annotations

from plugins.techniques import TECHNIQUES
from plugins.techniques._rules import kv_need, kv_shortfall, smallest_replica_tp, weight_gb_per_gpu
from service import SLO, LengthDist, ServerConfig, WorkloadProfile
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
    assert not PARALLELISM.applicable(ctx).applicable


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
