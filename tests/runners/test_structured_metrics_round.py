"""A round on the emulator reads goodput, cache hits per HiCache tier and EPLB balance from what SGLang exports.

GLM-4.5-Air at TP4 / EP4 with HiCache and a KV pool of a few thousand tokens (mem-fraction-static 0.62): the
documents outgrow the device pool, so later questions about them load their prefix back from the host tier.
"""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from plugins.runners.local import LocalRunner
from plugins.runners.simulated import SimulatedRunner
from service import RoundContext, RoundResult
from service.domain import (
    SLO,
    BenchSpec,
    Deployment,
    DocumentSet,
    Hardware,
    LengthDist,
    PrefixStructure,
    Scenario,
    ServerConfig,
    WorkerGroup,
    WorkloadProfile,
)
from service.plugin_host import PluginHost

from .conftest import settings

SCENARIO = Scenario(
    name="moe-hicache-emulated", model="zai-org/GLM-4.5-Air", sglang_version="0.5.23",
    hardware=Hardware(gpu="H100-SXM", gpus_per_node=8, nodes=1),
    deployment=Deployment(groups=[WorkerGroup(name="worker", replicas=1, base_port=31200, server=ServerConfig(
        tp_size=4, ep_size=4, mem_fraction_static=0.62, page_size=64, enable_hierarchical_cache=True,
        hicache_ratio=2.0, enable_metrics=True, enable_cache_report=True))]),
    workload=WorkloadProfile(name="document-qa", input=LengthDist(median=1920, kind="fixed"),
                             output=LengthDist(median=24, kind="fixed"),
                             prefix=PrefixStructure(system_prompt_tokens=256,
                                                    documents=DocumentSet(count=64, tokens=1536))),
    slo=SLO(ttft_p95_ms=2000, itl_median_ms=30),
    bench=BenchSpec(dataset="workload", num_prompts=96, max_concurrency=12, warmup_requests=2))


@pytest.fixture(scope="module")
def rounds() -> dict[str, RoundResult]:
    local = asyncio.run(LocalRunner().run_round(SCENARIO, seed=0, context=RoundContext(settings=settings())))
    cost_models = PluginHost(allow={"builtin_cost_models"}).components("cost_model")
    simulated = asyncio.run(SimulatedRunner().run_round(
        SCENARIO, seed=0, context=RoundContext(cost_model="roofline", cost_models=cost_models)))
    return {"local": local, "simulated": simulated}


def test_the_round_reports_goodput_against_the_slos_per_request_bounds(rounds: dict[str, RoundResult]) -> None:
    result = rounds["local"]
    assert result.status == "ok", result.error
    assert result.provenance.source == "emulated"
    bench = result.bench
    assert bench.goodput_slos_ms == {"ttft": 2000.0, "tpot": 30.0}
    assert bench.request_goodput is not None and bench.slo_attainment is not None
    assert 0 < bench.request_goodput <= bench.request_throughput + 1e-9
    assert bench.request_goodput == pytest.approx(bench.slo_attainment * bench.completed / bench.duration)


def test_cache_hits_are_split_by_tier_from_the_cache_source_label(rounds: dict[str, RoundResult]) -> None:
    server = rounds["local"].server
    tiers = server.cache_hit_rate_by_tier
    assert tiers is not None and tiers["device"] > 0 and tiers["host"] > 0
    assert sum(tiers.values()) == pytest.approx(server.cache_hit_rate)
    assert server.missing == []
    simulated = rounds["simulated"].server.cache_hit_rate_by_tier
    assert simulated is not None and simulated["host"] > 0  # the simulator sees the same tiers


def test_eplb_balance_comes_from_the_exported_summary(rounds: dict[str, RoundResult]) -> None:
    result = rounds["local"]
    worker = next(p for p in result.provenance.processes if p.kind == "worker")
    assert "--expert-balancedness-report-mode" in worker.argv  # the renderer turned the report on under EP
    balance = result.server.eplb_balancedness
    assert balance is not None and 0.5 < balance < 1.0
    assert result.expert_imbalance == pytest.approx(1.0 / balance)
    # The emulator and the simulator price the same per-rank expert load.
    assert rounds["simulated"].server.eplb_balancedness == pytest.approx(balance)


def test_the_same_round_without_ep_exports_no_balance() -> None:
    group = SCENARIO.deployment.groups[0]
    dense = msgspec.structs.replace(group, server=msgspec.structs.replace(group.server, ep_size=1))
    scenario = msgspec.structs.replace(SCENARIO, deployment=Deployment(groups=[dense]),
                                       bench=msgspec.structs.replace(SCENARIO.bench, num_prompts=16))
    result = asyncio.run(LocalRunner().run_round(scenario, seed=0, context=RoundContext(settings=settings())))
    assert result.status == "ok", result.error
    assert result.server.eplb_balancedness is None and result.expert_imbalance is None
