"""A live service's warm prefix cache (`bench.warm_prompts`) against a freshly started server's empty one."""

from __future__ import annotations

import msgspec
import numpy as np

from service.domain import Deployment, RouterConfig, Scenario, resolve_model
from service.simulator.requests import build_requests

from .conftest import load, run

RAG = load("document-qa-rag-round0")


def _rag(prompts: int, warm: int) -> Scenario:
    """Casebook case 2 with the variable fields at the end, on two TP2 replicas behind cache_aware."""
    group = RAG.deployment.groups[0]
    group = msgspec.structs.replace(group, replicas=2, server=msgspec.structs.replace(group.server, tp_size=2))
    prefix = msgspec.structs.replace(RAG.workload.prefix, variable_position="back")
    return msgspec.structs.replace(
        RAG, deployment=Deployment(groups=[group], router=RouterConfig(policy="cache_aware")),
        workload=msgspec.structs.replace(RAG.workload, prefix=prefix),
        bench=msgspec.structs.replace(RAG.bench, num_prompts=prompts, warm_prompts=warm))


def test_warm_prompts_come_before_bench_servings_own_warmup_and_leave_the_measured_rows_alone() -> None:
    model = resolve_model(RAG.model)
    cold_warm, cold = build_requests(RAG.workload, _rag(50, 0).bench, model, np.random.default_rng(3))
    served_warm, measured = build_requests(RAG.workload, _rag(50, 120).bench, model, np.random.default_rng(3))
    assert len(measured) == len(cold) == 50
    assert len(served_warm) == 120 + RAG.bench.warmup_requests and all(r.warmup for r in served_warm)
    assert not any(r.warmup for r in measured)
    # bench_serving's warm-up still repeats the first measured row, right before the run.
    assert served_warm[-1].blocks == measured[0].blocks and cold_warm[-1].blocks == cold[0].blocks
    # The served traffic draws documents from the same popularity law: most of it is on the 50 popular ones.
    docs = [b[0] for r in served_warm[:120] for b in r.blocks if 1_000 <= b[0] < 1_000 + 1_000]
    assert sum(d < 1_050 for d in docs) > 0.6 * len(docs)
    assert {r.rid for r in served_warm[:120]}.isdisjoint({r.rid for r in measured})


def test_a_warm_service_misses_fewer_documents_than_a_freshly_started_one() -> None:
    cold, warm = run(_rag(300, 0)), run(_rag(300, 900))
    # A fresh server misses every document once, the 50 popular ones included; a warm one misses only the
    # cold documents its pool no longer holds.
    assert warm.server.cache_hit_rate > cold.server.cache_hit_rate + 0.05
    assert warm.bench.p99_ttft_ms < cold.bench.p99_ttft_ms
    assert warm.bench.completed == cold.bench.completed == 300
