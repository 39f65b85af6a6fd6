"""Starting settings that hold the server back are fixed at the cause, before the techniques they would distort.

Casebook "Server Metrics": a hit rate far below the sharing rate means the prefix is not reused; "if GPU
utilization is low but the queue is long, it's a scheduling issue"; "if token_usage is close to 1.0 and
num_queue_reqs is also high, KV cache shortage is the bottleneck. Distinguishing these two is the starting
point for diagnosis."
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from plugins.techniques.scheduling import RadixCache, SchedulingLimits
from service import SLO, Objective, ServerMetrics, WorkloadProfile
from tests.unit.techniques.scenarios import context, deployment, measured, scenario, tune

MODEL = "Qwen/Qwen3.6-27B"


def _shared(scen, rate: float):  # type: ignore[no-untyped-def]
    return msgspec.structs.replace(scen, workload=msgspec.structs.replace(scen.workload, prefix_sharing_rate=rate))


def _queued(concurrency: float, queue: float, usage: float):  # type: ignore[no-untyped-def]
    result = measured(concurrency)
    return msgspec.structs.replace(result, server=ServerMetrics(num_queue_reqs=queue, token_usage=usage))


def test_a_disabled_radix_cache_is_turned_back_on_where_prefixes_are_shared() -> None:
    technique = RadixCache()
    off = scenario(MODEL, "H100-SXM", 2, deployment(MODEL, tp=2, disable_radix_cache=True), clients=32)
    rule = technique.applicable(context(_shared(off, 0.7)))
    assert rule.applicable and "sharing rate 0.70" in rule.reason
    [delta] = technique.propose(context(_shared(off, 0.7)))
    assert delta.set_server == {"disable_radix_cache": False}
    # Below 0.2 with nothing shared, RadixAttention offers almost no benefit: the flag is left alone.
    lone = msgspec.structs.replace(off, workload=WorkloadProfile(prefix_sharing_rate=0.05))
    assert not technique.applicable(context(lone)).applicable
    assert not technique.applicable(context(scenario(MODEL, "H100-SXM", 2, deployment(MODEL, tp=2),
                                                     clients=32))).applicable


def test_a_running_cap_below_the_load_is_raised_unless_the_kv_cache_is_full() -> None:
    technique = SchedulingLimits()
    capped = scenario(MODEL, "H200-SXM", 4, deployment(MODEL, tp=4, max_running_requests=8), clients=48,
                      slo=SLO(ttft_p95_ms=2000))
    assert not technique.applicable(context(capped)).applicable  # nothing measured yet
    queued = context(capped, baseline=_queued(47.0, 39.0, 0.2))
    rule = technique.applicable(queued)
    assert rule.applicable and "a scheduling limit, not a capacity one" in rule.reason
    [delta] = technique.propose(queued)
    assert delta.set_server == {"max_running_requests": 48}
    # A saturated KV cache is a capacity limit: more running requests would be preempted.
    full = technique.applicable(context(capped, baseline=_queued(47.0, 39.0, 0.97)))
    assert not full.applicable and "saturated" in full.reason
    # Without a latency SLO the batch is batch_parameters' to maximise.
    batch = msgspec.structs.replace(capped, slo=SLO(), objective=Objective(kind="throughput"))
    assert not technique.applicable(context(batch, baseline=_queued(47.0, 39.0, 0.2))).applicable


def test_speculation_s_reset_to_48_running_requests_is_a_cap_too() -> None:
    # SGLang resets an unset --max-running-requests to 48 under EAGLE-family speculation: 105 requests per
    # instance with 57 queued and a roomy KV cache queue behind that cap, not behind memory.
    technique = SchedulingLimits()
    eagle = scenario(MODEL, "H200-SXM", 8, deployment(MODEL, tp=2, replicas=4, speculative_algorithm="EAGLE3"),
                     clients=512, slo=SLO(ttft_p95_ms=3000))
    queued = context(eagle, baseline=_queued(420.0, 57.0, 0.3))
    rule = technique.applicable(queued)
    assert rule.applicable and "a cap of 48 (SGLang's reset to 48 under EAGLE3 speculation" in rule.reason
    [delta] = technique.propose(queued)
    assert delta.set_server == {"max_running_requests": 112}
    assert delta.summary == "max-running-requests 112 (from 48, SGLang's speculative reset)"
    # Without speculation and without a cap, the KV pool sizes the batch: nothing to raise.
    plain = scenario(MODEL, "H200-SXM", 8, deployment(MODEL, tp=2, replicas=4), clients=512, slo=SLO(ttft_p95_ms=3000))
    free = technique.applicable(context(plain, baseline=_queued(420.0, 57.0, 0.3)))
    assert not free.applicable and "SGLang sizes the batch from the KV pool" in free.reason


SCENARIO = """
name = "capped-27b"
model = "Qwen/Qwen3.6-27B"
sglang_version = "0.5.23"

[hardware]
gpu = "H200-SXM"
gpus_per_node = 8

[[deployment.groups]]
name = "worker"

[deployment.groups.server]
tp-size = 4
max-running-requests = 8

[workload]
input = { median = 1200, p95 = 4000 }
output = { median = 300, p95 = 900 }
prefix = { system_prompt_tokens = 800 }

[slo]
ttft_p95_ms = 2000
itl_median_ms = 50

[objective]
kind = "latency"

[bench]
dataset = "workload"
num_prompts = 200
max_concurrency = 48
"""


def test_the_cap_is_fixed_before_more_gpus_are_added(tmp_path: Path) -> None:
    # 48 clients on a server capped at 8 running requests miss the 2 s TTFT target by seconds, with four of
    # the node's eight GPUs idle. scale_out would spread the same capped queue over two servers; the cap is
    # the cause, so it is raised first, and with it the target is met on the same four GPUs.
    engine = tune(tmp_path / "capped.toml", SCENARIO, "scale_out", "scheduling_limits")
    first = engine.job.rounds[1]
    assert engine.job.rounds[0].results[0].bench.p95_ttft_ms > 2000
    assert first.technique == "scheduling_limits" and first.decision is not None
    assert first.decision.verdict.keeps_candidate()
    assert engine.state.accepted.deployment.total_gpus() == 4
    assert not [r for r in engine.job.rounds if r.technique == "scale_out"]

