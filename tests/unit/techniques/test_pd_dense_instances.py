"""PD for a dense model keeps the workers' own instances: no node-wide prefill TP8, no EP decode domain.

The casebook's PD (case 5) is a MoE's: TP8 prefill nodes and one EP decode domain over the rest. A dense 27B
has no experts: put into that shape it prefilled through one TP8 server and decoded with `--ep-size 8
--moe-a2a-backend deepep` on a model without experts, flags an engineer would not ship. Its pools are the TP4
instances it runs, split by instance, several shares measured first and then one instance either way.
"""

from __future__ import annotations

import msgspec

from plugins.techniques.moe import PdDisaggregation, first_prefill_instances
from service import (
    SLO,
    Deployment,
    Hardware,
    LengthDist,
    RouterConfig,
    ServerConfig,
    WorkerGroup,
    WorkloadProfile,
)
from service.engine.delta import apply_delta
from service.engine.launch import render_launch
from service.scenario_check import check_candidate
from tests.unit.techniques.scenarios import context, deployment, scenario

DENSE = "Qwen/Qwen3.6-27B"
LONG_DOCS = WorkloadProfile(input=LengthDist(median=30000, p95=60000), output=LengthDist(median=200, p95=500),
                            peak_concurrency=64)
PD = PdDisaggregation()


def _two_nodes():
    start = deployment(DENSE, tp=4, replicas=4)
    start = msgspec.structs.replace(start, groups=[msgspec.structs.replace(start.groups[0], base_port=30001)])
    scen = scenario(DENSE, "H100-SXM", 8, start, clients=64, workload=LONG_DOCS,
                    slo=SLO(ttft_p95_ms=6000, itl_median_ms=30))
    scen = msgspec.structs.replace(scen, hardware=Hardware(gpu="H100-SXM", gpus_per_node=8, nodes=2))
    assert check_candidate(scen) == []
    return scen


def test_a_dense_models_pd_splits_its_own_instances_without_expert_flags() -> None:
    scen = _two_nodes()
    assert PD.applicable(context(scen)).applicable
    splits = PD.propose(context(scen))
    assert [d.summary for d in splits] == ["PD prefill 1 / decode 3 (TP4 instances)",
                                           "PD prefill 2 / decode 2 (TP4 instances)",
                                           "PD prefill 3 / decode 1 (TP4 instances)"]
    for delta in splits:
        candidate = apply_delta(scen, delta)
        assert check_candidate(candidate) == []
        for group in candidate.deployment.groups:
            server = group.server
            assert (server.tp_size, server.ep_size, server.moe_a2a_backend, server.attention_dp_size) == (4, 1, None, 1)
        workers, router = render_launch(candidate.deployment, candidate.hardware, candidate.sglang_version,
                                        candidate.model)
        argv = " ".join(a for w in workers for a in w.argv)
        assert "--ep-size" not in argv and "deepep" not in argv and "--expert" not in argv
        assert len(workers) == 4 and router is not None and "--pd-disaggregation" in router.argv
    # Three prefill instances on two nodes: the two sharing node01 get their own bootstrap ports.
    workers, router = render_launch(apply_delta(scen, splits[2]).deployment, scen.hardware, scen.sglang_version, DENSE)
    assert [(w.host, w.argv[w.argv.index("--port") + 1]) for w in workers] == [
        ("node01", "30001"), ("node01", "30002"), ("node02", "30003"), ("node02", "30004")]
    assert router.argv.count("--prefill") == 3 and router.argv.count("--decode") == 1


def test_a_kept_dense_split_moves_one_instance_either_way() -> None:
    scen = _two_nodes()
    kept = apply_delta(scen, PD.propose(context(scen))[1])  # prefill 2 / decode 2
    assert [d.summary for d in PD.propose(context(kept))] == ["PD prefill 3 / decode 1 (TP4 instances)",
                                                             "PD prefill 1 / decode 3 (TP4 instances)"]


def test_first_shares_span_a_quarter_to_three_quarters_of_the_instances() -> None:
    assert first_prefill_instances(4) == [1, 2, 3]
    assert first_prefill_instances(16) == [4, 5, 8, 10, 12]
    assert first_prefill_instances(2) == [1]


def test_one_dense_instance_over_both_nodes_is_cut_to_a_node_per_pool() -> None:
    # TP16 over two nodes is one instance: PD's pools are then one TP8 instance each, 16 GPUs in all, not two
    # TP16 servers asking for 32.
    start = deployment(DENSE, tp=16)
    start = msgspec.structs.replace(start, groups=[msgspec.structs.replace(start.groups[0], base_port=30001)],
                                    router=None)
    scen = scenario(DENSE, "H100-SXM", 8, start, clients=64, workload=LONG_DOCS, slo=SLO(ttft_p95_ms=6000))
    scen = msgspec.structs.replace(scen, hardware=Hardware(gpu="H100-SXM", gpus_per_node=8, nodes=2))
    [split] = PD.propose(context(scen))
    assert split.summary == "PD prefill 1 / decode 1 (TP8 instances)"
    candidate = apply_delta(scen, split)
    assert candidate.deployment.total_gpus() == 16 and check_candidate(candidate) == []


def test_pd_splits_the_gpus_the_deployment_runs_on_and_adds_none() -> None:
    # TP4 x 2 on 8 of the two nodes' 16 GPUs: the pools share those 8 (scale_out is what adds GPUs).
    start = deployment(DENSE, tp=4, replicas=2)
    start = msgspec.structs.replace(start, groups=[msgspec.structs.replace(start.groups[0], base_port=30001)])
    scen = scenario(DENSE, "H100-SXM", 8, start, clients=64, workload=LONG_DOCS, slo=SLO(ttft_p95_ms=6000))
    scen = msgspec.structs.replace(scen, hardware=Hardware(gpu="H100-SXM", gpus_per_node=8, nodes=2))
    [split] = PD.propose(context(scen))
    assert split.summary == "PD prefill 1 / decode 1 (TP4 instances)"
    assert apply_delta(scen, split).deployment.total_gpus() == 8


def test_a_started_pd_with_its_own_pools_moves_gpus_and_keeps_each_pools_settings() -> None:
    # Prefill one TP4 server with chunk 16384, decode six TP2 servers capped at 64 running: moving a TP4's worth
    # of GPUs is one more prefill server against two fewer decode servers (an empty prefill pool is not offered),
    # and each pool keeps its own flags and TP.
    scen = _two_nodes()
    prefill = WorkerGroup(name="prefill", role="prefill", replicas=1, bootstrap_port=8998, base_port=30001,
                          server=ServerConfig(model_path=DENSE, tp_size=4, chunked_prefill_size=16384))
    decode = WorkerGroup(name="decode", role="decode", replicas=6, base_port=30002,
                         server=ServerConfig(model_path=DENSE, tp_size=2, max_running_requests=64))
    router = RouterConfig(policy="round_robin", prefill_policy="cache_aware", decode_policy="power_of_two")
    scen = msgspec.structs.replace(scen, deployment=Deployment(groups=[prefill, decode], router=router))
    assert check_candidate(scen) == []
    [more_prefill] = PD.propose(context(scen))
    assert more_prefill.summary == "PD prefill 2 / decode 4 (TP4/TP2 instances)"
    moved = apply_delta(scen, more_prefill)
    roles = {g.role: g for g in moved.deployment.groups}
    assert moved.deployment.total_gpus() == 16 and check_candidate(moved) == []
    assert (roles["prefill"].replicas, roles["prefill"].server.tp_size) == (2, 4)
    assert (roles["decode"].replicas, roles["decode"].server.tp_size) == (4, 2)
    assert roles["prefill"].server.chunked_prefill_size == 16384 and roles["decode"].server.max_running_requests == 64
    assert roles["decode"].base_port == 30003  # past the grown prefill pool's ports
