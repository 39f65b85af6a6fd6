"""Replicas that outnumber the requests in flight are merged into a wider TP on the same GPUs.

Four TP2 replicas of Qwen3.6-27B on eight H100s behind a router, for one user under a latency objective,
leave three replicas idle while the one request decodes on two GPUs: a whole job kept that layout (median
ITL 10.6 ms, p95 TTFT 387 ms, simulated). As TP8 x 1 the request decodes at 4.2 ms and its p95 TTFT is
136 ms. Under the cost objective the idle replicas are right_sizing's to drop, not this step's to merge.
"""

from __future__ import annotations

import msgspec

from plugins.techniques import Parallelism
from service import SLO, Objective

from .scenarios import context, deployment, measured, scenario

MODEL = "Qwen/Qwen3.6-27B"


def _replicas(clients: int, objective: str = "latency"):
    scen = scenario(MODEL, "H100-SXM", 8, deployment(MODEL, tp=2, replicas=4), clients=clients,
                    slo=SLO(ttft_p95_ms=2000, itl_median_ms=40), objective=Objective(kind=objective))
    return context(scen, baseline=measured(float(clients), median_itl_ms=10.6))


def test_one_user_on_four_replicas_is_offered_one_wide_instance() -> None:
    ctx = _replicas(clients=1)
    applies = Parallelism().applicable(ctx)
    assert applies.applicable and applies.reason.startswith("4 replicas for 1 request in flight: 3 sit idle")
    assert [d.summary for d in Parallelism().propose(ctx)] == ["TP8 x 1 (from TP2 x 4)"]
    # Two users: the split that gives each a replica of its own, and the one wide instance.
    assert [d.summary for d in Parallelism().propose(_replicas(clients=2))] == [
        "TP4 x 2 + power_of_two router", "TP8 x 1 (from TP2 x 4)"]


def test_busy_replicas_and_the_cost_objective_are_left_to_other_steps() -> None:
    busy = Parallelism().applicable(_replicas(clients=16))
    assert not busy.applicable and busy.reason.startswith("At TP1 the weights would take 50 GiB")
    assert Parallelism().propose(_replicas(clients=1, objective="cost")) == []


def test_one_user_with_nothing_shared_measures_no_router_policy() -> None:
    from plugins.techniques import RouterPolicy

    def round_robin(clients: int):
        ctx = _replicas(clients=clients, objective="cost")
        dep = ctx.scenario.deployment
        dep = msgspec.structs.replace(dep, router=msgspec.structs.replace(dep.router, policy="round_robin"))
        return msgspec.structs.replace(ctx, scenario=msgspec.structs.replace(ctx.scenario, deployment=dep))

    verdict = RouterPolicy().applicable(round_robin(1))
    assert not verdict.applicable and verdict.reason.startswith("One client stream keeps one request in flight")
    assert RouterPolicy().applicable(round_robin(4)).applicable
