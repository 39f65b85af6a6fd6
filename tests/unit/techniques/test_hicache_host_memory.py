"""A HiCache host pool must fit in the node's host memory, or SGLang does not start the server.

SGLang's host pool checks the free host memory before it allocates (`mem_cache/pool_host/base.py`: "Not enough
host memory available. Requesting ... Please reduce the size of the hierarchical cache."), less a 10 GiB
reserve. Eight TP1 replicas of a 9B on one H200 node hold about 119 GB of KV each, so the casebook's ratio 2
asks for 1.9 TB of host memory: on a 1 TB node no server would start. The technique sizes the ratio to what
the node holds, the simulator refuses the start as SGLang does, and the local runner names the cause.
"""

from __future__ import annotations

import msgspec
import pytest

from plugins.runners.local.failures import CONFIG_FAULTS, cause_from_log
from plugins.techniques.caching import HiCache, host_ratio
from service.domain import Hardware, LengthDist, PrefixStructure, WorkloadProfile, resolve_model
from service.domain.workload import DocumentSet
from service.simulator import simulate_round
from service.simulator.analytic import analytic_binder
from service.simulator.memory import HostMemoryShort, host_pool_tokens, node_ranks, resolve_server
from tests.unit.techniques.scenarios import context, deployment, scenario

MODEL = "Qwen/Qwen3.6-9B"
POLICY_QA = WorkloadProfile(
    input=LengthDist(median=12300, p95=13500), output=LengthDist(median=200, p95=400), prefix_sharing_rate=0.85,
    peak_concurrency=64, prefix=PrefixStructure(system_prompt_tokens=300, documents=DocumentSet(
        count=1000, tokens=12000, popular=400, popular_share=0.9)))


def _node(dram_gb: float, **server: object):
    scen = scenario(MODEL, "H200-SXM", 8, deployment(MODEL, tp=1, replicas=8, **server), clients=64, workload=POLICY_QA)
    return msgspec.structs.replace(scen, hardware=msgspec.structs.replace(scen.hardware, host_dram_gb=dram_gb))


def test_the_ratio_is_what_the_node_holds_and_none_below_one_device_pool() -> None:
    assert host_ratio(context(_node(2048))) == (
        1.75, "hardware.host_dram_gb = 2048 leaves 219 GB per server for a device pool of 119 GB")
    [delta] = HiCache().propose(context(_node(2048)))
    assert delta.set_server["hicache_ratio"] == 1.75
    assert delta.summary.startswith("HiCache ratio 1.75, page 64, write_through (hardware.host_dram_gb = 2048")
    verdict = HiCache().applicable(context(_node(1024)))
    assert not verdict.applicable
    assert "the host memory cannot hold a tier as large as the GPU pool" in verdict.reason
    assert "hardware.host_dram_gb = 1024 leaves 109 GB per server" in verdict.reason
    assert HiCache().propose(context(_node(1024))) == []
    # One such server on the node has its memory to itself: ratio 2 (2 x 119 GB of 1 TB).
    one = _node(1024)
    one = msgspec.structs.replace(one, deployment=msgspec.structs.replace(one.deployment, groups=[
        msgspec.structs.replace(one.deployment.groups[0], replicas=1)], router=None))
    assert host_ratio(context(one)) == (2.0, "")
    # A node with room for twice every device pool keeps the casebook's ratio 2, with no note.
    [roomy] = HiCache().propose(context(_node(4096)))
    assert roomy.set_server["hicache_ratio"] == 2.0 and roomy.summary == "HiCache ratio 2, page 64, write_through"


def test_a_host_pool_past_the_host_memory_does_not_start_in_the_simulator() -> None:
    scen = _node(1024, enable_hierarchical_cache=True, hicache_ratio=2.0, page_size=64)
    model = resolve_model(MODEL)
    result = simulate_round(scen, model, analytic_binder(model, scen.hardware), seed=1, cost_model="analytic")
    assert result.status.value == "failed" and result.config_fault and result.error_phase == "start"
    assert result.error.startswith("Not enough host memory available for the HiCache host pool: requesting 238")
    assert "reduce --hicache-ratio or --hicache-size (GB per GPU rank), or give hardware.host_dram_gb" in result.error


def _server(name: str, gpu: str, tp: int, dram_gb: float, **server: object):
    scen = scenario(name, gpu, 8, deployment(name, tp=tp, replicas=8 // tp, enable_hierarchical_cache=True, **server),
                    clients=64)
    hardware = msgspec.structs.replace(scen.hardware, host_dram_gb=dram_gb)
    srv = scen.deployment.groups[0].server
    return resolve_server(resolve_model(name), hardware, srv), srv, hardware


def test_hicache_size_is_gigabytes_on_every_gpu_rank_as_sglang_reads_it() -> None:
    # `pool_host/base.py`: size = hicache_size * 1e9 // size_per_token, per rank. A 27B's KV heads split over
    # TP4, so each rank's 100 GB holds four times the tokens one TP1 rank's does, and the server pins 400 GB.
    one, one_srv, hardware = _server("Qwen/Qwen3.6-27B", "H100-SXM", 1, 4096, hicache_size=100)
    four, four_srv, _ = _server("Qwen/Qwen3.6-27B", "H100-SXM", 4, 4096, hicache_size=100)
    tp1, tp4 = host_pool_tokens(one, one_srv, hardware, 8), host_pool_tokens(four, four_srv, hardware, 2)
    assert tp1 == int(100e9 / one.kv_bytes_per_gpu_token) and tp4 == int(100e9 / four.kv_bytes_per_gpu_token)
    assert tp4 == pytest.approx(4 * tp1, rel=1e-6)
    # Two TP4 servers on a 768 GB node: 800 GB asked for, 604 GB free (80% less the 10 GiB reserve).
    _, _, small = _server("Qwen/Qwen3.6-27B", "H100-SXM", 4, 768, hicache_size=100)
    with pytest.raises(HostMemoryShort, match=r"requesting 400.0 GB \(.* over 4 GPU ranks on the node\)"):
        host_pool_tokens(four, four_srv, small, 2)


def test_a_ratio_counts_every_rank_of_a_replicated_mla_latent() -> None:
    # An MLA latent is whole on every GPU of the group: DeepSeek-V4-Flash TP8's device pool is the per-GPU pool
    # eight times over, and ratio 2 pins twice that, not twice one GPU's share.
    resolved, srv, hardware = _server("deepseek-ai/DeepSeek-V4-Flash", "H200-SXM", 8, 4096, hicache_ratio=2.0)
    assert resolved.device_pool_bytes == pytest.approx(resolved.pool_tokens * resolved.kv_bytes_per_gpu_token * 8)
    assert host_pool_tokens(resolved, srv, hardware, 1) == 2 * resolved.pool_tokens
    _, _, small = _server("deepseek-ai/DeepSeek-V4-Flash", "H200-SXM", 8, 1024, hicache_ratio=2.0)
    with pytest.raises(HostMemoryShort):
        host_pool_tokens(resolved, srv, small, 1)


def test_the_local_runner_reads_sglangs_host_memory_refusal_as_a_configuration_fault() -> None:
    line = ("ValueError: Not enough host memory available. Requesting 238.40 GB but only have 99.20 GB free. "
            "Please reduce the size of the hierarchical cache.")
    assert cause_from_log(line) == "host_memory" and "host_memory" in CONFIG_FAULTS
    assert cause_from_log("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.") == "oom"


def test_a_server_over_two_nodes_pins_each_nodes_share_against_that_nodes_memory() -> None:
    # SGLang checks each rank against its own node's free memory over the ranks there (`ranks_per_host`).
    # DeepSeek-V4-Flash TP16 over two H200 nodes holds 1.88 TB of device pool, 0.94 TB per node: ratio 2 pins
    # 1.88 TB on each node, which a 4 TB node holds and a 2 TB node does not; counting both nodes' ranks against
    # one node's memory had refused it on 4 TB too.
    name = "deepseek-ai/DeepSeek-V4-Flash"
    scen = scenario(name, "H200-SXM", 8, deployment(name, tp=16, enable_hierarchical_cache=True, hicache_ratio=2.0),
                    clients=64)
    server = scen.deployment.groups[0].server
    for dram, starts in ((4096, True), (2048, False)):
        hardware = Hardware(gpu="H200-SXM", gpus_per_node=8, nodes=2, host_dram_gb=dram)
        resolved = resolve_server(resolve_model(name), hardware, server)
        assert node_ranks(resolved, hardware) == 8 and resolved.world_size == 16
        if starts:
            assert host_pool_tokens(resolved, server, hardware, 1.0) == 2 * resolved.pool_tokens
        else:
            with pytest.raises(HostMemoryShort, match=r"requesting 1881.6 GB \(.* over 8 GPU ranks on the node\)"):
                host_pool_tokens(resolved, server, hardware, 1.0)
    # The technique sizes the ratio to one node's share: 1,748 GB free for 941 GB of device pool per node.
    two_tb = msgspec.structs.replace(scen, hardware=Hardware(gpu="H200-SXM", gpus_per_node=8, nodes=2,
                                                            host_dram_gb=2048))
    assert host_ratio(context(two_tb))[0] == 1.75
