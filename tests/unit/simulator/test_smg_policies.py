"""SMG's prefix_hash and least_load, as the simulator routes them (model_gateway/src/policies/*.rs)."""

from __future__ import annotations

import msgspec
import numpy as np

from service.domain import RouterConfig, resolve_model
from service.simulator import simulate_round
from service.simulator.analytic import AnalyticStepCost
from service.simulator.router import Router
from service.simulator.smg_policies import LeastLoad, PrefixHash

from .conftest import load


def test_prefix_hash_keeps_a_prefix_on_one_worker_until_it_is_overloaded() -> None:
    policy = PrefixHash(4)
    doc = ((7, 256), (1234, 300))
    target = policy.target(doc)
    assert all(policy.target(((7, 256), (other, 300))) == policy.target(((7, 256), (other, 5))) for other in range(50))
    assert policy.pick(doc, [0, 0, 0, 0]) == target
    # avg = (13 + 1) / 4 = 3.5; threshold max(3.5 * 1.25, 3.5 + 10) = 13.5: 13 in flight still keeps it.
    loads = [0, 0, 0, 0]
    loads[target] = 13
    assert policy.pick(doc, loads) == target
    loads[target] = 40  # overloaded: the least-loaded acceptable worker takes it
    others = [w for w in range(4) if w != target]
    loads[others[0]], loads[others[1]], loads[others[2]] = 3, 0, 2
    assert policy.pick(doc, loads) == others[1]
    # Only the first --prefix-token-count tokens count: beyond them, requests share a worker.
    short = PrefixHash(4, {"--prefix-token-count": 256})
    assert len({short.target(((7, 256), (doc_id, 300))) for doc_id in range(40)}) == 1
    assert len({PrefixHash(4, {"--prefix-token-count": 512}).target(((7, 256), (d, 300))) for d in range(40)}) > 1


def test_least_load_scores_polled_queues_and_kv_pressure_and_counts_dispatches_since_the_poll() -> None:
    polled = {0: (4, 0.5), 1: (0, 0.9), 2: (1, 0.1)}
    policy = LeastLoad(3, np.random.default_rng(0), probe=lambda w: polled[w])
    # Scores: w0 4*1024/2000 + 0.15 = 2.2; w1 0 + 0.15*9 = 1.35; w2 1024/2000 + 0.15/9 = 0.53.
    assert policy.pick([0, 0, 0], now=0.0) == 2
    # w2 now carries one more dispatch (1.04); a second goes to w2 again, a third to w1 (1.35 < 1.55).
    assert policy.pick([0, 0, 0], now=1.0) == 2
    assert policy.pick([0, 0, 0], now=2.0) == 1
    polled[1] = (9, 0.9)
    policy.pick([0, 0, 0], now=5.0)  # between polls the old snapshot stands
    assert policy.polled[1] == (0, 0.9) and sum(policy.since_poll) == 4
    assert policy.pick([0, 0, 0], now=10.0) == 2  # the new poll: w1 now has 9 waiting (4.6 + 1.35)
    assert policy.polled[1] == (9, 0.9) and policy.since_poll == [0, 0, 1]


def test_least_load_joins_the_shortest_queue_before_any_poll() -> None:
    router = Router("least_load", 3, RouterConfig(policy="least_load", package="smg"), np.random.default_rng(0))
    router.inflight = [3, 1, 2]
    assert router.pick((), now=0.0) == 1


def test_both_policies_run_a_round_and_prefix_hash_keeps_the_documents_cache() -> None:
    base = load("coding-assistant-round0")
    model = resolve_model(base.model)

    def bind(server):  # noqa: ANN001, ANN202
        return AnalyticStepCost(model=model, hardware=base.hardware, server=server)

    rates = {}
    for policy in ("round_robin", "prefix_hash", "least_load"):
        group = msgspec.structs.replace(base.deployment.groups[0], replicas=2,
                                        server=msgspec.structs.replace(base.deployment.groups[0].server, tp_size=1))
        router = RouterConfig(policy=policy, package="smg", extra={"--prefix-token-count": 4096})
        scenario = msgspec.structs.replace(
            base, deployment=msgspec.structs.replace(base.deployment, groups=[group], router=router),
            bench=msgspec.structs.replace(base.bench, num_prompts=80))
        result = simulate_round(scenario, model, bind, seed=2, cost_model="analytic")
        assert result.status.value == "ok" and result.bench.completed == 80, policy
        rates[policy] = result.server.cache_hit_rate
    assert rates["prefix_hash"] >= rates["round_robin"]
