"""A cache_aware router the tuner sets up balances load at the load it serves.

sglang-router's cache_aware balances only while the busiest worker holds more than --balance-abs-threshold
(64) requests over the idlest; with 64 clients or fewer in all that never happens, and traffic whose shared
prefix passes the cache threshold in every prompt all goes to the first worker that cached it. The tuner's
cache_aware routers (policy changes, replica splits, scale-out, PD to unified) balance at one worker's
share of the clients instead; a threshold the user set, and more clients than the default, are left alone.
"""

from __future__ import annotations

import msgspec

from plugins.techniques import Parallelism, RouterPolicy
from plugins.techniques._rules import fit_balance
from service import LengthDist, PrefixStructure, RouterConfig, WorkloadProfile

from .scenarios import context, deployment, scenario

MODEL = "Qwen/Qwen3.6-9B"
# Agents under one 20,000-token system prompt: every prompt's shared prefix passes the 0.3 cache threshold.
AGENTS = WorkloadProfile(input=LengthDist(median=22000, p95=30000), output=LengthDist(median=300, p95=700),
                         prefix_sharing_rate=0.9, peak_concurrency=64,
                         prefix=PrefixStructure(system_prompt_tokens=20000))


def _replicas(router: RouterConfig, clients: int = 64):
    dep = msgspec.structs.replace(deployment(MODEL, tp=1, replicas=4), router=router)
    return scenario(MODEL, "H100-SXM", 4, dep, clients=clients, workload=AGENTS)


def test_a_policy_change_to_cache_aware_balances_at_one_workers_share() -> None:
    [delta] = RouterPolicy().propose(context(_replicas(RouterConfig(policy="round_robin"))))
    assert delta.router is not None and delta.router.policy == "cache_aware"
    assert delta.router.balance_abs_threshold == 16  # 64 clients over 4 workers
    assert delta.summary == "router policy cache_aware (balance-abs-threshold 16)"


def test_a_threshold_the_user_set_or_a_load_past_the_default_is_left_alone() -> None:
    mine = RouterConfig(policy="cache_aware", balance_abs_threshold=32)
    assert fit_balance(mine, _replicas(mine), 4) == mine
    busy = RouterConfig(policy="cache_aware")
    assert fit_balance(busy, _replicas(busy, clients=256), 4).balance_abs_threshold is None
    other = RouterConfig(policy="power_of_two")
    assert fit_balance(other, _replicas(other), 4).balance_abs_threshold is None


def test_a_replica_split_behind_cache_aware_balances_at_its_share() -> None:
    one = scenario(MODEL, "H100-SXM", 4, deployment(MODEL, tp=4), clients=64, workload=AGENTS)
    splits = Parallelism().propose(context(one))
    assert [d.summary for d in splits] == ["TP1 x 4 + cache_aware router (balance-abs-threshold 16)",
                                           "TP2 x 2 + cache_aware router (balance-abs-threshold 32)"]
    assert [d.deployment.router.balance_abs_threshold for d in splits] == [16, 32]


def test_a_threshold_this_rule_set_follows_a_new_worker_count_and_a_recut_keeps_its_ports() -> None:
    # 25 agent streams on TP2 x 2 behind cache_aware at the threshold the rule gave it (13): a TP1 x 4 re-cut
    # balances at 7, as the same split from one TP4 instance does, on the router's and workers' own ports, so
    # the two are one candidate and a job does not measure it twice.
    two = msgspec.structs.replace(deployment(MODEL, tp=2, replicas=2),
                                  router=RouterConfig(policy="cache_aware", port=30000, balance_abs_threshold=13))
    two = msgspec.structs.replace(two, groups=[msgspec.structs.replace(two.groups[0], base_port=30001)])
    from_two = {d.summary: d.deployment for d in Parallelism().propose(
        context(scenario(MODEL, "H100-SXM", 4, two, clients=25, workload=AGENTS)))}
    single = deployment(MODEL, tp=4)
    one = msgspec.structs.replace(single, groups=[msgspec.structs.replace(single.groups[0], base_port=30000)])
    from_one = {d.summary: d.deployment for d in Parallelism().propose(
        context(scenario(MODEL, "H100-SXM", 4, one, clients=25, workload=AGENTS)))}
    key = "TP1 x 4 + cache_aware router (balance-abs-threshold 7)"
    assert key in from_two and from_two[key] == from_one[key]
    assert from_two[key].router.port == 30000 and from_two[key].groups[0].base_port == 30001
    # A threshold that is not one worker's share of the clients is the user's, and stays.
    mine = msgspec.structs.replace(two, router=msgspec.structs.replace(two.router, balance_abs_threshold=20))
    assert {d.deployment.router.balance_abs_threshold for d in Parallelism().propose(
        context(scenario(MODEL, "H100-SXM", 4, mine, clients=25, workload=AGENTS)))} == {20}
