"""SMG (sgl-model-gateway, PyPI `smg`) beside sglang-router 0.3.2: its catalogue, rendering and validation."""

from __future__ import annotations

import gzip
import json

import msgspec
import pytest

from service.domain import RouterConfig, Scenario
from service.sglang import RenderRefused, catalogue_versions, load_catalogue, render_scenario, router_catalogue
from service.sglang.flags import ROUTER, SMG
from service.sglang.validate import validate_argv, validate_scenario

from .conftest import DUMPS


def _router(scenario: Scenario, **changes: object) -> Scenario:
    router = msgspec.structs.replace(scenario.deployment.router or RouterConfig(), **changes)
    return msgspec.structs.replace(scenario, deployment=msgspec.structs.replace(scenario.deployment, router=router))


def test_the_smg_catalogue_holds_every_flag_of_its_dump_with_its_policies_and_metrics():
    assert catalogue_versions(SMG) == ("1.13.0",)
    catalogue = router_catalogue(SMG)
    dump = json.loads(gzip.decompress((DUMPS / "smg_args_1.13.0.json.gz").read_bytes()))
    assert {s for e in dump if e["action"] != "_HelpAction" for s in e["flags"]} == set(catalogue.spellings())
    assert catalogue.policies == ["random", "round_robin", "passthrough", "cache_aware", "power_of_two", "least_load",
                                  "manual", "consistent_hashing", "prefix_hash"]
    assert catalogue.get("--prefill-policy").choices[-1] == "bucket"
    assert catalogue.get("--prefix-token-count").default == 256
    assert catalogue.get("--least-load-mean-prefill-tokens").default == 1024
    assert {"smg_router_requests_total", "smg_worker_requests_active", "smg_prefix_hash_policy_branch_total"} <= set(
        catalogue.metrics)
    assert "smg 1.13.0" in catalogue.source and "smg_args_1.13.0.json" in catalogue.source
    # The frozen router keeps its own catalogue and stays the default.
    assert router_catalogue().package == ROUTER and router_catalogue().version == "0.3.2"
    assert "prefix_hash" not in router_catalogue().policies and router_catalogue().metrics == []


def test_a_default_router_still_renders_sglang_router(coding_final):
    router = render_scenario(coding_final, sglang_version="0.5.23").router
    assert router.argv[1:3] == ["-m", "sglang_router.launch_router"]
    assert (router.package, router.version) == ("sglang-router", "0.3.2")


def test_an_smg_router_renders_its_module_policy_and_flags(coding_final):
    scenario = _router(coding_final, package="smg", policy="prefix_hash", extra={"--prefix-token-count": 64})
    router = render_scenario(scenario, sglang_version="0.5.23").router
    assert router.argv[:3] == ["python", "-m", "smg.launch_router"]
    assert router.argv[router.argv.index("--policy") + 1] == "prefix_hash"
    assert router.argv[-2:] == ["--prefix-token-count", "64"]
    assert (router.package, router.version) == ("smg", "1.13.0")
    assert validate_argv(router.argv, package=SMG) == []
    # The same argv is not an sglang-router launch.
    assert any(issue.field == "argv[2]" for issue in validate_argv(router.argv, package=ROUTER))


@pytest.mark.parametrize("policy", ["prefix_hash", "least_load"])
def test_an_smg_policy_on_sglang_router_is_refused_naming_the_field_and_the_fix(coding_final, policy):
    issues = validate_scenario(_router(coding_final, policy=policy), sglang_version="0.5.23")
    [issue] = [issue for issue in issues if issue.severity == "error"]
    assert issue.field == "deployment.router.policy"
    assert f"sglang-router 0.3.2 has no {policy} policy" in issue.message
    assert 'deployment.router.package = "smg"' in issue.hint
    with pytest.raises(RenderRefused):
        render_scenario(_router(coding_final, policy=policy), sglang_version="0.5.23")


def test_an_smg_flag_on_sglang_router_names_the_router_that_has_it(coding_final):
    issues = validate_scenario(_router(coding_final, extra={"--least-load-kv-pressure-weight": 0.3}),
                               sglang_version="0.5.23")
    [issue] = [issue for issue in issues if issue.severity == "error"]
    assert issue.field == "deployment.router.extra.--least-load-kv-pressure-weight"
    assert 'deployment.router.package = "smg"' in issue.hint


def test_smg_refuses_flags_of_its_own_the_safety_policy_covers_and_unknown_versions(coding_final):
    danger = validate_scenario(_router(coding_final, package="smg", extra={"--enable-wasm": True}),
                               sglang_version="0.5.23")
    assert any(issue.flag == "--enable-wasm" and "runs_code" in issue.message for issue in danger)
    unknown = validate_scenario(_router(coding_final, package="smg", version="0.0.1"), sglang_version="0.5.23")
    assert [issue.field for issue in unknown] == ["deployment.router.version"]
    assert "1.13.0" in unknown[0].hint


def test_smg_offers_bucket_for_prefill_only():
    assert "bucket" not in (load_catalogue("1.13.0", SMG).get("--decode-policy").choices or [])
    assert "bucket" in (load_catalogue("1.13.0", SMG).get("--prefill-policy").choices or [])
