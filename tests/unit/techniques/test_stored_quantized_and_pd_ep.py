"""Starting points the quantization and expert-parallelism rules misread: a checkpoint already stored in FP8,
and a PD deployment whose decode pool is a plain TP instance."""

from __future__ import annotations

import msgspec

from plugins.techniques import MoeParallelism, PdDisaggregation, Quantization
from service import Deployment, Hardware, RouterConfig, ServerConfig, WorkerGroup
from service.domain.model import bundled_configs
from service.engine.delta import apply_delta
from service.scenario_check import check_candidate

from .scenarios import context, deployment, scenario

FP8_CHECKPOINT = "deepseek-ai/DeepSeek-V3"  # its config.json carries quantization_config: fp8 (block-wise)


def test_an_fp8_checkpoint_is_offered_only_the_fp8_kv_cache() -> None:
    ctx = context(scenario(FP8_CHECKPOINT, "H200-SXM", 8, deployment(FP8_CHECKPOINT, tp=8), clients=64))
    assert Quantization().applicable(ctx).applicable
    (delta,) = Quantization().propose(ctx)
    # `--quantization fp8` would only restate the checkpoint's own method, and "FP8 weights" would send the
    # quality gate after a change the deployment already runs.
    assert "quantization" not in delta.set_server
    assert delta.set_server["kv_cache_dtype"] == "fp8_e5m2"
    assert delta.summary == "FP8 KV (weights already FP8 in the checkpoint)"
    done = scenario(FP8_CHECKPOINT, "H200-SXM", 8, deployment(FP8_CHECKPOINT, tp=8, kv_cache_dtype="fp8_e5m2"),
                    clients=64)
    verdict = Quantization().applicable(context(done))
    assert not verdict.applicable
    assert "checkpoint stores its weights in FP8" in verdict.reason


def test_a_bf16_checkpoint_still_gets_fp8_weights_and_kv() -> None:
    model = "Qwen/Qwen3.6-27B"
    (delta,) = Quantization().propose(context(scenario(model, "H100-SXM", 8, deployment(model, tp=8), clients=25)))
    assert delta.set_server["quantization"] == "fp8" and delta.summary == "FP8 weights + FP8 KV"


def _pd(prefill: int, decode: int) -> Deployment:
    server = ServerConfig(model_path=FP8_CHECKPOINT, tp_size=8)
    return Deployment(groups=[WorkerGroup(name="prefill", role="prefill", replicas=prefill, base_port=32000,
                                          bootstrap_port=32090, server=server),
                              WorkerGroup(name="decode", role="decode", replicas=decode, base_port=32010,
                                          server=server)],
                      router=RouterConfig(policy="round_robin", port=32100))


def test_ep_on_a_pd_deployment_regroups_the_decode_pool_and_keeps_the_prefill_pool() -> None:
    # One TP8 prefill node and three TP8 decode nodes of DeepSeek-V3: EP used to rebuild the deployment as
    # one 32-GPU group with role prefill, refused before launch ("PD disaggregation needs prefill and
    # decode groups only; got ['prefill']").
    scen = scenario(FP8_CHECKPOINT, "H200-SXM", 8, _pd(1, 3), clients=128)
    scen = msgspec.structs.replace(scen, hardware=Hardware(gpu="H200-SXM", gpus_per_node=8, nodes=4))
    ctx = context(scen)
    assert MoeParallelism().applicable(ctx).applicable
    proposals = MoeParallelism().propose(ctx)
    assert len(proposals) == 2
    assert proposals[0].summary == ("decode pool as EP8 + DP attention 2 x 3, prefill pool unchanged")
    for delta in proposals:
        prefill, decode = delta.deployment.groups
        assert (prefill.role, prefill.replicas, prefill.server.tp_size, prefill.server.ep_size) == ("prefill", 1, 8, 1)
        assert decode.role == "decode"
        # The decode pool's 24 GPUs regrouped into instances that split DeepSeek-V3's 256 experts evenly:
        # three EP8 (an EP24 would fail DeepEP's `num_experts % group.size() == 0`).
        assert (decode.replicas, decode.server.ep_size, decode.server.tp_size) == (3, 8, 8)
        assert decode.server.moe_a2a_backend == "deepep" and decode.server.attention_dp_size == 2
        assert delta.deployment.router is not None
        assert "prefill pool unchanged" in delta.summary
        assert check_candidate(apply_delta(scen, delta)) == []


def test_a_two_node_decode_pool_becomes_one_ep16_instance() -> None:
    scen = scenario(FP8_CHECKPOINT, "H200-SXM", 8, _pd(2, 2), clients=128)
    scen = msgspec.structs.replace(scen, hardware=Hardware(gpu="H200-SXM", gpus_per_node=8, nodes=4))
    delta = MoeParallelism().propose(context(scen))[0]
    decode = delta.deployment.groups[1]
    assert (decode.replicas, decode.server.ep_size) == (1, 16)
    assert check_candidate(apply_delta(scen, delta)) == []


def test_ep_on_three_nodes_splits_the_experts_evenly_and_the_check_refuses_an_uneven_split() -> None:
    # 24 H200s of DeepSeek-V3 as three TP8 replicas: an EP24 instance would fail SGLang's FusedMoE assert
    # (256 experts over 24 ranks), so EP runs as three EP8 instances; a start written with ep-size 24 is
    # refused before launch, naming the field and the sizes that split.
    replicas = deployment(FP8_CHECKPOINT, tp=8, replicas=3)
    replicas = msgspec.structs.replace(replicas, router=RouterConfig(policy="power_of_two", port=30100))
    scen = scenario(FP8_CHECKPOINT, "H200-SXM", 8, replicas, clients=128)
    scen = msgspec.structs.replace(scen, hardware=Hardware(gpu="H200-SXM", gpus_per_node=8, nodes=3))
    for delta in MoeParallelism().propose(context(scen)):
        (group,) = delta.deployment.groups
        assert (group.replicas, group.server.ep_size) == (3, 8), delta.summary
        assert check_candidate(apply_delta(scen, delta)) == []
    uneven = msgspec.structs.replace(scen, deployment=deployment(FP8_CHECKPOINT, tp=24, ep_size=24,
                                                                    attention_dp_size=3))
    issues = [i for i in check_candidate(uneven) if i.field.endswith("server.ep-size")]
    assert len(issues) == 1, check_candidate(uneven)
    assert "256 experts (256 routed + 0 redundant) do not divide over 24 EP ranks" in issues[0].message
    assert issues[0].hint == ("use ep-size 2, 4, 8 (dividing both tp-size 24 and the 256 experts), or set "
                              "ep-num-redundant-experts to 8 (or more, in steps of 24)")
    with_spares = msgspec.structs.replace(uneven, deployment=deployment(
        FP8_CHECKPOINT, tp=24, ep_size=24, attention_dp_size=3, ep_num_redundant_experts=8))
    assert not [i for i in check_candidate(with_spares) if i.field.endswith("server.ep-size")]


def test_every_pd_split_of_an_ep_domain_loads_its_experts() -> None:
    # Casebook case 5: DeepSeek-V4-Flash (256 experts) on 16 nodes of H200 as EP32 + EPLB instances, split into
    # PD pools. The casebook's decode domain of 11 nodes takes 88 redundant experts, which SGLang cannot load
    # (344 over 88 ranks); each split's decode domain carries the fewest at or above its EP size that split.
    model = "deepseek-ai/DeepSeek-V4-Flash"
    dep = deployment(model, tp=32, replicas=4, ep_size=32, attention_dp_size=8, moe_a2a_backend="deepep",
                     enable_eplb=True, ep_num_redundant_experts=32)
    dep = msgspec.structs.replace(dep, router=RouterConfig(policy="cache_aware", port=8000))
    scen = scenario(model, "H200-SXM", 8, dep, clients=2048)
    scen = msgspec.structs.replace(scen, hardware=Hardware(gpu="H200-SXM", gpus_per_node=8, nodes=16,
                                                           interconnect="infiniband"))
    proposals = PdDisaggregation().propose(context(scen))
    assert proposals
    for delta in proposals:
        decode = next(g for g in delta.deployment.groups if g.role == "decode")
        ep, spare = decode.server.ep_size, decode.server.ep_num_redundant_experts
        assert spare >= ep and (256 + spare) % ep == 0, (delta.summary, ep, spare)
        assert check_candidate(apply_delta(scen, delta)) == [], delta.summary
    five_eleven = next(d for d in proposals if d.summary.startswith("PD prefill 5 / decode 11"))
    assert next(g for g in five_eleven.deployment.groups if g.role == "decode").server.ep_num_redundant_experts == 96


def test_eplb_on_a_decode_domain_takes_redundant_experts_that_split_evenly() -> None:
    # An EP88 decode domain (11 of 16 nodes) of DeepSeek-V4-Flash without EPLB: EPLB's redundant experts
    # equal to the EP size (the casebook's 88) would give 344 experts over 88 ranks, which SGLang cannot load.
    model = "deepseek-ai/DeepSeek-V4-Flash"
    server = ServerConfig(model_path=model, tp_size=88, ep_size=88, attention_dp_size=22, moe_a2a_backend="deepep",
                          ep_num_redundant_experts=8)
    dep = Deployment(groups=[WorkerGroup(name="prefill", role="prefill", replicas=5, base_port=32000,
                                         bootstrap_port=32090, server=ServerConfig(model_path=model, tp_size=8)),
                             WorkerGroup(name="decode", role="decode", replicas=1, base_port=32010, server=server)],
                     router=RouterConfig(policy="cache_aware", port=32100))
    scen = scenario(model, "H200-SXM", 8, dep, clients=1024)
    scen = msgspec.structs.replace(scen, hardware=Hardware(gpu="H200-SXM", gpus_per_node=8, nodes=16))
    (delta,) = MoeParallelism().propose(context(scen))
    assert delta.set_server["ep_num_redundant_experts"] == 96 and delta.summary == "EPLB deepseek, 96 redundant experts"


def test_a_checkpoint_quantized_in_unstated_bits_is_never_offered_quantization_fp8(tmp_path) -> None:  # noqa: ANN001
    # compressed-tensors keeps its bits in `config_groups`: SGLang would still refuse `--quantization fp8` on it
    # (`_verify_quantization`: the checkpoint's method and the flag's differ).
    import json

    cfg = json.loads(bundled_configs()["Qwen/Qwen3-32B"].read_text())
    cfg["quantization_config"] = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {}}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    model = str(tmp_path)
    (delta,) = Quantization().propose(context(scenario(model, "H100-SXM", 2, deployment(model, tp=2), clients=16)))
    assert "quantization" not in delta.set_server
    assert delta.summary == "FP8 KV (weights already compressed-tensors in the checkpoint)"


def test_pd_is_not_proposed_for_a_moe_model_one_node_cannot_hold() -> None:
    # Kimi-K2 (1T parameters in FP8) as TP16 over two H200 nodes: the casebook's prefill node (TP8,
    # mem-fraction-static 0.85) would need 120.2 GiB of weights a GPU where 119.8 GiB are left, so a node-wide
    # PD split is refused before launch every time it is proposed. It is skipped with the figure instead.
    model = "moonshotai/Kimi-K2-Instruct"
    two_nodes = Hardware(gpu="H200-SXM", gpus_per_node=8, nodes=2)
    kimi = msgspec.structs.replace(scenario(model, "H200-SXM", 8, deployment(model, tp=16), clients=96),
                                   hardware=two_nodes)
    rule = PdDisaggregation().applicable(context(kimi))
    assert not rule.applicable
    assert rule.reason.startswith("PD pools are whole nodes, and moonshotai/Kimi-K2-Instruct does not start on one "
                                  "node as the casebook's prefill node (TP8, mem-fraction-static 0.85): ")
    assert "needs 120.2 GiB of weights per GPU" in rule.reason
    # DeepSeek-V3 (671B in FP8) fits a node: its split is proposed and every candidate passes the door.
    dsv3 = msgspec.structs.replace(scenario(FP8_CHECKPOINT, "H200-SXM", 8, deployment(FP8_CHECKPOINT, tp=16),
                                            clients=96), hardware=two_nodes)
    assert PdDisaggregation().applicable(context(dsv3)).applicable
    for delta in PdDisaggregation().propose(context(dsv3)):
        assert check_candidate(apply_delta(dsv3, delta)) == [], delta.summary
