"""Starts that already run the large-scale layouts (EP, EPLB, DP attention, PD) below the casebook's 16-GPU scale.

Casebook "GPU Scale": below 16 GPUs tune a single node; PD disaggregation and large-scale EP are detrimental
there. A deployment that starts with them is compared with the plain layout on the same GPUs, which no other
technique proposes (parallelism, scale_out and router_policy leave a PD deployment to pd_disaggregation). A
replica split of an EP instance keeps EP inside each replica's TP group, as SGLang requires.
"""

from __future__ import annotations

import msgspec

from plugins.techniques import MoeParallelism, PdDisaggregation
from plugins.techniques._rules import at_tp, replica_split
from service import Deployment, RouterConfig, ServerConfig, WorkerGroup, check_scenario
from service.engine.delta import apply_delta

from .scenarios import context, deployment, scenario

MOE = "Qwen/Qwen3.6-35B-A3B"
DENSE = "Qwen/Qwen3.6-9B"
EPLB = {"ep_size": 2, "enable_eplb": True, "eplb_algorithm": "deepseek", "ep_num_redundant_experts": 2}


def _errors(scen) -> list[str]:
    return [str(issue) for issue in check_scenario(scen) if issue.severity == "error"]


def _ep_start():
    return scenario(MOE, "H100-SXM", 2, deployment(MOE, tp=2, **EPLB), clients=64)


def test_ep_and_eplb_on_two_gpus_are_compared_with_the_plain_tp_instance() -> None:
    ctx = context(_ep_start())
    verdict = MoeParallelism().applicable(ctx)
    assert verdict.applicable
    assert "EP2 + EPLB" in verdict.reason and "16-GPU scale" in verdict.reason
    [delta] = MoeParallelism().propose(ctx)
    after = apply_delta(ctx.scenario, delta)
    server = after.deployment.groups[0].server
    assert (server.tp_size, server.ep_size, server.attention_dp_size) == (2, 1, 1)
    assert not server.enable_eplb and server.eplb_algorithm is None and server.ep_num_redundant_experts is None
    assert after.deployment.total_gpus() == 2
    assert _errors(after) == []


def test_a_plain_moe_below_scale_is_still_left_alone() -> None:
    verdict = MoeParallelism().applicable(context(scenario(MOE, "H100-SXM", 2, deployment(MOE, tp=2), clients=64)))
    assert not verdict.applicable and "16-GPU scale" in verdict.reason


def test_a_replica_split_keeps_ep_inside_each_replica() -> None:
    start = _ep_start()
    assert _errors(start) == []
    split = msgspec.structs.replace(start, deployment=replica_split(start, 1, "power_of_two"))
    group = split.deployment.groups[0]
    assert (group.replicas, group.server.tp_size, group.server.ep_size) == (2, 1, 1)
    assert not group.server.enable_eplb and group.server.ep_num_redundant_experts is None
    assert not any("ep-size" in e for e in _errors(split))
    # An EP8 instance halved to TP4 keeps EP4 and one redundant expert per EP rank.
    halved = at_tp(ServerConfig(tp_size=8, ep_size=8, attention_dp_size=8, enable_eplb=True,
                                ep_num_redundant_experts=8, moe_a2a_backend="deepep"), 4)
    assert (halved.tp_size, halved.ep_size, halved.attention_dp_size, halved.ep_num_redundant_experts) == (4, 4, 4, 4)
    assert halved.enable_eplb and halved.moe_a2a_backend == "deepep"


def _pd_start():
    server = ServerConfig(model_path=DENSE, tp_size=1, enable_metrics=True,
                          disaggregation_transfer_backend="mooncake")
    dep = Deployment(router=RouterConfig(policy="round_robin", prefill_policy="round_robin"), groups=[
        WorkerGroup(name="prefill", role="prefill", replicas=2, base_port=30001, bootstrap_port=8998, server=server),
        WorkerGroup(name="decode", role="decode", replicas=2, base_port=30011, server=server)])
    return scenario(DENSE, "H100-SXM", 4, dep, clients=64)


def test_pd_on_four_gpus_is_compared_with_unified_replicas_on_the_same_gpus() -> None:
    ctx = context(_pd_start())
    verdict = PdDisaggregation().applicable(ctx)
    assert verdict.applicable and "16-GPU scale" in verdict.reason
    [delta] = PdDisaggregation().propose(ctx)
    assert delta.summary.startswith("no PD: TP1 x 4 unified")
    after = apply_delta(ctx.scenario, delta)
    assert not after.deployment.is_pd
    [group] = after.deployment.groups
    assert (group.role, group.replicas, group.server.tp_size) == ("unified", 4, 1)
    assert group.server.disaggregation_transfer_backend is None
    router = after.deployment.router
    assert router is not None and router.prefill_policy is None and router.decode_policy is None
    # No sharing in this traffic: the casebook's load-balancing policy (case 5).
    assert router.policy == "power_of_two"
    assert after.deployment.total_gpus() == ctx.scenario.deployment.total_gpus()
    assert _errors(after) == []


def test_pd_at_scale_still_sweeps_the_node_split() -> None:
    hardware = msgspec.structs.replace(_pd_start().hardware, gpus_per_node=8, nodes=4)
    ctx = context(msgspec.structs.replace(_pd_start(), hardware=hardware))
    assert not any(d.summary.startswith("no PD") for d in PdDisaggregation().propose(ctx))


def test_a_replica_split_of_pipeline_or_data_parallel_servers_fills_the_same_gpus() -> None:
    # TP8 x PP2 over two 8-GPU nodes split into TP4 replicas: four of them, one stage each, on the same 16
    # GPUs (carrying pp-size 2 into each replica asked for 32). A dp-size 2 server split into TP1 replicas:
    # two of them, each one GPU.
    dense = "Qwen/Qwen3.6-27B"
    staged = scenario(dense, "H100-SXM", 8, deployment(dense, tp=8, pp_size=2), clients=64)
    staged = msgspec.structs.replace(staged, hardware=msgspec.structs.replace(staged.hardware, nodes=2))
    assert _errors(staged) == []
    split = msgspec.structs.replace(staged, deployment=replica_split(staged, 4, "power_of_two"))
    [group] = split.deployment.groups
    assert (group.replicas, group.server.tp_size, group.server.pp_size, group.server.world_size) == (4, 4, 1, 4)
    assert split.deployment.total_gpus() == 16 and _errors(split) == []
    copies = scenario(DENSE, "H100-SXM", 2, deployment(DENSE, tp=1, dp_size=2), clients=64)
    split = msgspec.structs.replace(copies, deployment=replica_split(copies, 1, "power_of_two"))
    [group] = split.deployment.groups
    assert (group.replicas, group.server.dp_size, group.server.world_size) == (2, 1, 1)
    assert split.deployment.total_gpus() == 2 and _errors(split) == []


def test_one_ep_instance_from_routed_replicas_drops_the_router_and_takes_its_port() -> None:
    # DeepSeek-V4-Flash as TP8 x 2 over two H200 nodes behind power_of_two (router_policy kept it): the EP16
    # candidate is one instance, which power_of_two refuses ("needs at least 2 workers"), so both EP layouts
    # were refused before launch and EP never measured. One instance needs no router: it takes the router's port.
    model = "deepseek-ai/DeepSeek-V4-Flash"
    routed = msgspec.structs.replace(deployment(model, tp=8, replicas=2), router=RouterConfig(policy="power_of_two",
                                                                                             port=30000))
    routed = msgspec.structs.replace(routed, groups=[msgspec.structs.replace(routed.groups[0], base_port=30001)])
    scen = scenario(model, "H200-SXM", 8, routed, clients=512)
    scen = msgspec.structs.replace(scen, hardware=msgspec.structs.replace(scen.hardware, nodes=2))
    candidates = MoeParallelism().propose(context(scen))
    assert [d.summary for d in candidates] == ["EP16 + DP attention 4 x 1, no router",
                                               "EP16 + DP attention 4 x 1, no router, two-batch overlap"]
    for delta in candidates:
        assert delta.deployment is not None and delta.deployment.router is None
        assert delta.deployment.groups[0].base_port == 30000 and delta.deployment.groups[0].replicas == 1
        assert not _errors(apply_delta(scen, delta))


def test_pd_from_one_instance_without_a_router_puts_the_router_on_its_port_and_the_workers_after_it() -> None:
    # One EP16 instance on port 30000 with no router (as the EP step leaves it): the PD candidate's router took
    # its default port 30000 and the prefill server the instance's 30000, on the same node, and was refused.
    model = "deepseek-ai/DeepSeek-V4-Flash"
    alone = deployment(model, tp=16, ep_size=16, attention_dp_size=4, moe_a2a_backend="deepep")
    alone = msgspec.structs.replace(alone, groups=[msgspec.structs.replace(alone.groups[0], base_port=30000)])
    scen = scenario(model, "H200-SXM", 8, alone, clients=512)
    scen = msgspec.structs.replace(scen, hardware=msgspec.structs.replace(scen.hardware, nodes=2))
    [pd] = PdDisaggregation().propose(context(scen))
    assert pd.deployment is not None and pd.deployment.router is not None and pd.deployment.router.port == 30000
    assert {g.base_port for g in pd.deployment.groups} == {30001}
    assert not _errors(apply_delta(scen, pd))
