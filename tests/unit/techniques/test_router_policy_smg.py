"""router_policy proposes SMG's prefix_hash and least_load only for a deployment whose router is SMG."""

from __future__ import annotations

import msgspec

from plugins.techniques import RouterPolicy
from service import LengthDist, RouterConfig, Scenario, check_candidate

from .scenarios import context, deployment, scenario


def _scenario(*, package: str, policy: str = "round_robin", sharing: float = 0.5,
              input_p95: int | None = None) -> Scenario:
    dep = deployment("Qwen/Qwen3.6-27B", replicas=2)
    dep = msgspec.structs.replace(dep, router=RouterConfig(policy=policy, package=package, port=8000))
    scen = scenario("Qwen/Qwen3.6-27B", "H100-SXM", 2, dep, clients=16)
    dist = LengthDist(median=900, p95=input_p95) if input_p95 else LengthDist(median=900, kind="fixed")
    workload = msgspec.structs.replace(scen.workload, prefix_sharing_rate=sharing, input=dist)
    return msgspec.structs.replace(scen, workload=workload)


def _policies(scen: Scenario) -> list[str]:
    return [delta.router.policy for delta in RouterPolicy().propose(context(scen)) if delta.router is not None]


def test_sglang_router_deployments_get_the_casebook_candidates_only() -> None:
    assert _policies(_scenario(package="sglang-router", input_p95=4000)) == ["cache_aware"]


def test_smg_adds_prefix_hash_for_shared_prefixes_and_least_load_for_uneven_sizes() -> None:
    assert _policies(_scenario(package="smg")) == ["cache_aware", "prefix_hash"]
    assert _policies(_scenario(package="smg", sharing=0.0, input_p95=4000)) == ["power_of_two", "least_load"]
    applies = RouterPolicy().applicable(context(_scenario(package="smg", policy="cache_aware", input_p95=4000)))
    assert applies.applicable
    assert "prefix_hash" in applies.reason and "tree walk" in applies.reason
    assert "least_load" in applies.reason and "4.4x" in applies.reason


def test_every_smg_candidate_passes_the_candidate_check() -> None:
    scen = _scenario(package="smg", input_p95=4000)
    proposals = RouterPolicy().propose(context(scen))
    assert [delta.summary for delta in proposals] == ["router policy cache_aware", "router policy prefix_hash",
                                                      "router policy least_load"]
    for delta in proposals:
        candidate = msgspec.structs.replace(scen, deployment=msgspec.structs.replace(scen.deployment,
                                                                                     router=delta.router))
        assert check_candidate(candidate) == [], delta.summary
