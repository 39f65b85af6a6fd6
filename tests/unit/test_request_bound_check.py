"""Prompts a server's KV pool cannot admit are named at the door, with the pools that would admit them.

SGLang bounds a request by `max_req_len = min(context length, pool tokens) - 1` and refuses a prompt of
`max_req_len - 5` tokens or more. Qwen3.6-9B in BF16 on one 24 GB L4 keeps a pool of a few thousand tokens:
a p95 prompt past it loses the longest requests of every round (a warning), a median prompt past it most of
the traffic (an error). The fix is named with its figure: a wider TP the nodes hold, or an FP8 KV cache.
"""

from __future__ import annotations

import msgspec

from service import Hardware, LengthDist, WorkloadProfile, check_scenario
from service.domain import resolve_model
from service.simulator import resolve_server
from tests.unit.techniques.scenarios import deployment, scenario

MODEL = "Qwen/Qwen3.6-9B"


def _issues(median: int, p95: int, gpus: int = 1):
    workload = WorkloadProfile(input=LengthDist(median=median, p95=p95), output=LengthDist(median=300, p95=600),
                               peak_concurrency=4)
    scen = scenario(MODEL, "L4", gpus, deployment(MODEL, tp=1), clients=4, workload=workload)
    scen = msgspec.structs.replace(scen, hardware=Hardware(gpu="L4", gpus_per_node=gpus))
    pool = resolve_server(resolve_model(MODEL), scen.hardware, scen.deployment.groups[0].server).pool_tokens
    return [i for i in check_scenario(scen) if "KV pool" in i.message], pool


def test_a_p95_prompt_past_the_pool_is_a_warning_naming_the_pools_that_admit_it() -> None:
    issues, pool = _issues(1_500, 5_000, gpus=2)
    assert 1_000 < pool < 5_000, pool  # the premise: the L4's pool is smaller than the p95 prompt
    [issue] = issues
    assert issue.severity == "warning" and issue.field == "deployment.groups[0].server.tp-size"
    assert issue.message.startswith(f"worker's KV pool of {pool:,} tokens per instance admits prompts under "
                                    f"{pool - 6:,} tokens; the p95 prompt of 5,000 tokens is refused")
    assert issue.hint.startswith("give each instance a pool of more than 5,007 tokens: more GPUs: tp-size 2 (a pool of ")
    assert 'an FP8 KV cache: kv-cache-dtype = "fp8_e5m2"' in issue.hint


def test_a_median_prompt_past_the_pool_is_an_error_and_prompts_inside_it_are_clean() -> None:
    issues, _ = _issues(5_000, 8_000)
    [issue] = issues
    assert issue.severity == "error" and "the median prompt of 5,000 tokens is refused" in issue.message
    assert issue.hint == ("give each instance a pool of more than 8,007 tokens: larger GPUs or a model with a "
                          "smaller KV cache per token")
    clean, pool = _issues(500, 1_500)
    assert pool > 1_500 and clean == []


def test_under_dp_attention_the_bound_is_one_ranks_pool() -> None:
    # Qwen3-Coder-480B in FP8 as TP16 with DP attention 16 on two H100 nodes: each rank's scheduler holds its
    # own pool of about 157k tokens, below the 262k-token context; the server's 2.5M tokens are their sum.
    # SGLang bounds a request by its rank's pool (`tp_worker.py` max_req_len from the rank's KV capacity).
    model = "Qwen/Qwen3-Coder-480B-A35B-Instruct"
    workload = WorkloadProfile(input=LengthDist(median=60_000, p95=180_000), output=LengthDist(median=500, p95=900),
                               peak_concurrency=8)
    dep = deployment(model, tp=16, attention_dp_size=16, ep_size=16, quantization="fp8")
    scen = scenario(model, "H100-SXM", 8, dep, clients=8, workload=workload)
    scen = msgspec.structs.replace(scen, hardware=Hardware(gpu="H100-SXM", gpus_per_node=8, nodes=2))
    resolved = resolve_server(resolve_model(model), scen.hardware, dep.groups[0].server)
    assert resolved.pool_tokens > resolve_model(model).max_context > resolved.rank_pool_tokens * 1.5
    [issue] = [i for i in check_scenario(scen) if "KV pool" in i.message]
    assert issue.severity == "warning"
    assert f"KV pool of {resolved.rank_pool_tokens:,} tokens per DP-attention rank" in issue.message
