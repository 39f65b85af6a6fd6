"""router_policy does not run again a replica split that parallelism measured in the same job.

On one instance, router_policy's candidate is a split behind the casebook's router (routing becomes part of
the caching strategy). When parallelism already measured that layout with that router and rolled it back, a
second round measures the same deployment: a 9B model on 8 L40S for chat at 8 streams ran TP2 x 4 +
cache_aware twice, the second round identical to the first to the token.
"""

from __future__ import annotations

from plugins.techniques import Parallelism, RouterPolicy
from service.engine.delta import delta_key

from .scenarios import context, deployment, scenario


def _scenario():
    return scenario("Qwen/Qwen3.6-9B", "L40S", 8, deployment("Qwen/Qwen3.6-9B", tp=8), clients=8)


def test_a_split_parallelism_measured_is_not_proposed_again_for_its_router() -> None:
    scen = _scenario()
    fresh = RouterPolicy().propose(context(scen))
    assert [delta.summary for delta in fresh] == ["TP2 x 4 + power_of_two router"]
    splits = Parallelism().propose(context(scen))
    assert "TP2 x 4 + power_of_two router" in [delta.summary for delta in splits]

    after = context(scen, tried=[delta_key(delta) for delta in splits])
    applies = RouterPolicy().applicable(after)
    assert not applies.applicable
    assert "already measured TP2 x 4 + power_of_two router" in applies.reason
    assert RouterPolicy().propose(after) == []


def test_a_split_parallelism_ran_with_another_router_is_still_proposed() -> None:
    scen = _scenario()
    other = [delta for delta in Parallelism().propose(context(scen)) if delta.summary.startswith("TP4")]
    after = context(scen, tried=[delta_key(delta) for delta in other])
    assert RouterPolicy().applicable(after).applicable
    assert [delta.summary for delta in RouterPolicy().propose(after)] == ["TP2 x 4 + power_of_two router"]
