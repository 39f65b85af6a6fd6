"""A HiCache tier that is already on is removed where the casebook's break-even says it does harm.

Casebook case 2 round 3: HiCache pays when restoring a prefix's KV from host memory beats recomputing it
(30 ms against 227 ms for a 20,000-token document on 4xH100); below that it is detrimental, and with no
shared prefix it has nothing to restore.
"""

from __future__ import annotations

import msgspec

from plugins.techniques.caching import HiCache
from service import DocumentSet, LengthDist, PrefixStructure, WorkloadProfile
from tests.unit.techniques.scenarios import context, deployment, scenario

HICACHE = HiCache()
ON = {"enable_hierarchical_cache": True, "hicache_ratio": 2.0, "hicache_write_policy": "write_through",
      "hicache_io_backend": "kernel", "page_size": 64}


def on(model: str, gpu: str, gpus: int, tp: int, prefix: PrefixStructure):
    workload = WorkloadProfile(input=LengthDist(median=16000), output=LengthDist(median=300), prefix=prefix,
                               prefix_sharing_rate=0.7, peak_concurrency=16)
    return context(scenario(model, gpu, gpus, deployment(model, tp=tp, **ON), clients=16, workload=workload))


def documents(tokens: int) -> PrefixStructure:
    return PrefixStructure(system_prompt_tokens=500, documents=DocumentSet(count=400, tokens=tokens))


def test_below_break_even_it_is_proposed_for_removal() -> None:
    # Qwen3.6-2B prefilled on eight B200s recomputes a 12,000-token manual faster than PCIe restores it.
    ctx = on("Qwen/Qwen3.6-2B", "B200", 8, 8, documents(12000))
    verdict = HICACHE.applicable(ctx)
    assert verdict.applicable and "below break-even" in verdict.reason and "remove it" in verdict.reason
    [delta] = HICACHE.propose(ctx)
    assert delta.summary == "remove HiCache" and delta.set_server["enable_hierarchical_cache"] is None


def test_with_nothing_shared_it_is_proposed_for_removal() -> None:
    ctx = on("Qwen/Qwen3.6-9B", "H100-SXM", 2, 2, PrefixStructure())
    verdict = HICACHE.applicable(ctx)
    assert verdict.applicable and "nothing to restore" in verdict.reason


def test_above_break_even_it_stays() -> None:
    # GLM-4.5-Air on four H100s: a 30,000-token contract costs far more to recompute than to restore.
    ctx = on("zai-org/GLM-4.5-Air", "H100-SXM", 4, 4, documents(30000))
    verdict = HICACHE.applicable(ctx)
    assert not verdict.applicable and "already enabled" in verdict.reason
    assert HICACHE.propose(ctx) == []
    off = msgspec.structs.replace(ctx, scenario=msgspec.structs.replace(
        ctx.scenario, deployment=deployment("zai-org/GLM-4.5-Air", tp=4)))
    assert HICACHE.applicable(off).applicable  # and would be proposed where it is off
