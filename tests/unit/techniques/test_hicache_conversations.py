"""Conversation histories that outgrow the GPU KV pools are HiCache's working set, as case 2's documents are.

Each turn of a conversation reuses its history as a prefix. When every conversation's history together is
larger than the replicas' KV pools, the radix cache evicts histories that come back a turn later and are
prefilled again; above the casebook's break-even (transfer beats recompute) the host tier restores them.
Histories that fit leave nothing to restore.
"""

from __future__ import annotations

from plugins.techniques.caching import HiCache
from service import LengthDist, PrefixStructure, WorkloadProfile
from tests.unit.techniques.scenarios import context, deployment, scenario

MODEL = "Qwen/Qwen3.6-27B"


def _chat(conversations: int):
    prefix = PrefixStructure(system_prompt_tokens=2000, history_tokens=16000, conversations=conversations)
    workload = WorkloadProfile(input=LengthDist(median=18000, p95=30000), output=LengthDist(median=400, p95=900),
                               prefix=prefix, prefix_sharing_rate=0.85, peak_concurrency=48)
    dep = deployment(MODEL, tp=2, replicas=2, quantization="fp8", kv_cache_dtype="fp8_e5m2")
    return context(scenario(MODEL, "H100-SXM", 4, dep, clients=48, workload=workload))


def test_histories_past_the_pools_get_a_host_tier_sized_for_long_prefixes() -> None:
    ctx = _chat(400)
    verdict = HiCache().applicable(ctx)
    assert verdict.applicable, verdict.reason
    assert verdict.reason.startswith("400 conversations of 16,000 history tokens (6,400,000) outgrow the GPU KV pools")
    assert "transfer beats recompute" in verdict.reason
    [delta] = HiCache().propose(ctx)
    assert delta.summary == "HiCache ratio 2, page 64, write_through"


def test_histories_that_fit_leave_nothing_to_restore() -> None:
    verdict = HiCache().applicable(_chat(20))  # 320,000 tokens of history
    assert not verdict.applicable and "fit on the GPU" in verdict.reason
