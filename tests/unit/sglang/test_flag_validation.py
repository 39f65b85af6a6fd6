"""Validation names the field at fault, what is wrong and the fix; it never raises for a user's mistake."""

from __future__ import annotations

import pytest

from service.domain import Deployment, Hardware, RouterConfig, ServerConfig, WorkerGroup
from service.sglang import (
    REPLACEMENTS,
    catalogue_versions,
    errors,
    load_catalogue,
    validate_deployment,
    validate_flags,
    validate_scenario,
    version_key,
)

from .conftest import single, with_extra, with_server


def _errors(issues):
    return [str(issue) for issue in errors(issues)]


def _one_error(issues) -> str:
    found = _errors(issues)
    assert len(found) == 1, found
    return found[0]


def test_the_casebook_final_configuration_is_valid_on_every_version(coding_final):
    for version in ("0.5.2", "0.5.9", "0.5.15", "0.5.20", "0.5.23"):
        assert _errors(validate_scenario(coding_final, sglang_version=version)) == []


def test_unknown_flag_names_the_nearest_valid_flag(coding_final):
    message = _one_error(validate_scenario(with_extra(coding_final, enable_metrix=True)))
    assert "unknown flag --enable-metrix for sglang 0.5.23" in message
    assert "did you mean --enable-metrics" in message
    assert message.startswith("deployment.groups[0].server.extra.--enable-metrix")


def test_abbreviated_flag_is_refused_naming_the_full_spelling(coding_final):
    message = _one_error(validate_scenario(with_extra(coding_final, trust_rem=True)))
    assert "--trust-rem abbreviates --trust-remote-code" in message


def test_wrong_value_type_is_refused(coding_final):
    message = _one_error(validate_scenario(with_extra(coding_final, max_total_tokens="lots")))
    assert "--max-total-tokens takes an integer such as 16384, 16k or 1Mi, got 'lots'" in message


def test_human_readable_sizes_pass_where_sglang_accepts_them(coding_final):
    assert _errors(validate_scenario(with_extra(coding_final, max_total_tokens="64k"))) == []
    assert _errors(validate_scenario(with_extra(coding_final, max_total_tokens="64k"), sglang_version="0.5.2"))


def test_switch_given_a_value_is_refused(coding_final):
    message = _one_error(validate_scenario(with_extra(coding_final, log_requests="yes")))
    assert "is a switch" in message


def test_value_outside_choices_lists_the_choices(coding_final):
    message = _one_error(validate_scenario(with_server(coding_final, kv_cache_dtype="bf16"), sglang_version="0.5.2"))
    assert "'bf16' is not a choice of --kv-cache-dtype" in message and "fp8_e5m2" in message
    assert message.startswith("deployment.groups[0].server.kv-cache-dtype")


def test_removed_flag_names_the_version_and_replacement(coding_final):
    scenario = with_extra(coding_final, enable_ep_moe=True)
    message = _one_error(validate_scenario(scenario, sglang_version="0.5.23"))
    assert ("--enable-ep-moe was removed after 0.5.2; use --ep-size equal to --tp-size (an all-to-all also "
            "needs --moe-a2a-backend)") in message
    issues = validate_scenario(scenario, sglang_version="0.5.2")
    assert _errors(issues) == []
    assert any("--enable-ep-moe is deprecated" in str(issue) for issue in issues)


@pytest.mark.parametrize(("flag", "version", "replacement"), [
    ("--cuda-graph-max-bs", "0.5.20", "--cuda-graph-max-bs-decode"),
    ("--cuda-graph-max-bs", "0.5.15", "--cuda-graph-max-bs-decode"),
    ("--cuda-graph-bs", "0.5.23", "--cuda-graph-bs-decode"),
    ("--enable-dp-attention", "0.5.23", "--attn-dp-size"),
    ("--enable-deepep-moe", "0.5.9", "--moe-a2a-backend deepep"),
    ("--stream-output", "0.5.20", "--incremental-streaming-output"),
    ("--collect-tokens-histogram", "0.5.15", "--enable-metrics"),
    ("--disaggregation-decode-tp", "0.5.23", "--tp-size"),
    ("--grpc-mode", "0.5.23", "--smg-grpc-mode"),
])
def test_superseded_flags_are_refused_naming_the_replacement(flag, version, replacement):
    message = _one_error(validate_flags({flag: True}, sglang_version=version))
    assert replacement in message and flag in message


def test_newer_flag_on_an_older_version_names_the_old_spelling():
    message = _one_error(validate_flags({"--attn-dp-size": 8}, sglang_version="0.5.20"))
    assert "does not exist before sglang 0.5.23" in message and "--enable-dp-attention --dp-size N" in message


def test_extra_may_not_duplicate_a_typed_field_or_a_rendered_flag(coding_final):
    assert "duplicates the typed field server.tp-size" in _one_error(
        validate_scenario(with_extra(coding_final, tp_size=4)))
    assert "is set by the renderer" in _one_error(validate_scenario(with_extra(coding_final, port=31000)))


def test_more_gpus_than_the_hardware_has():
    deployment, hardware = single(ServerConfig(tp_size=4), replicas=3)
    assert "needs 12 GPUs; the hardware has 8" in _errors(
        validate_deployment(deployment, hardware, sglang_version="0.5.23", model="m"))[0]


def test_multi_node_server_must_fill_whole_nodes():
    deployment, hardware = single(ServerConfig(tp_size=12), nodes=2)
    message = _one_error(validate_deployment(deployment, hardware, sglang_version="0.5.23", model="m"))
    assert "not a whole number of 8-GPU nodes" in message


def test_hicache_needs_pages_larger_than_one_token():
    for page_size in (None, 1):
        deployment, hardware = single(ServerConfig(tp_size=2, enable_hierarchical_cache=True, page_size=page_size))
        message = _one_error(validate_deployment(deployment, hardware, sglang_version="0.5.23", model="m"))
        assert "HiCache needs KV pages larger than one token" in message and "page-size = 64" in message
    deployment, hardware = single(ServerConfig(tp_size=2, enable_hierarchical_cache=True, page_size=64))
    assert _errors(validate_deployment(deployment, hardware, sglang_version="0.5.23", model="m")) == []


def test_expert_parallel_size_must_divide_the_server():
    for ep_size in (16, 3):
        deployment, hardware = single(ServerConfig(tp_size=8, ep_size=ep_size))
        assert "does not divide the server's 8 GPUs" in _one_error(
            validate_deployment(deployment, hardware, sglang_version="0.5.23", model="m"))


def test_attention_dp_must_divide_tp():
    deployment, hardware = single(ServerConfig(tp_size=8, attention_dp_size=3))
    assert "attention-dp-size 3 does not divide tp-size 8" in _one_error(
        validate_deployment(deployment, hardware, sglang_version="0.5.23", model="m"))


def test_speculative_settings_need_an_algorithm(coding_final):
    message = _one_error(validate_scenario(with_server(coding_final, speculative_algorithm=None)))
    assert "set without speculative-algorithm" in message


def _pd(prefill: WorkerGroup, router: RouterConfig | None) -> list[str]:
    decode = WorkerGroup(name="decode", role="decode", base_port=30010, first_gpu=4, server=ServerConfig(tp_size=4))
    deployment = Deployment(groups=[prefill, decode], router=router)
    return _errors(validate_deployment(deployment, Hardware(gpu="H200-SXM"), sglang_version="0.5.23", model="m"))


def test_pd_prefill_without_bootstrap_port_is_refused():
    prefill = WorkerGroup(name="prefill", role="prefill", server=ServerConfig(tp_size=4))
    found = _pd(prefill, RouterConfig(port=8000))
    assert found == ["deployment.groups[0].bootstrap_port: prefill group 'prefill' has no bootstrap port; "
                     "set bootstrap_port (SGLang's default is 8998)"]


def test_pd_roles_without_a_router_are_refused():
    prefill = WorkerGroup(name="prefill", role="prefill", bootstrap_port=8998, server=ServerConfig(tp_size=4))
    assert any("PD roles without a router" in message for message in _pd(prefill, None))


def test_two_workers_on_one_gpu_are_refused():
    groups = [WorkerGroup(name="a", base_port=30001, server=ServerConfig(tp_size=2)),
              WorkerGroup(name="b", base_port=30002 + 10, first_gpu=1, server=ServerConfig(tp_size=2))]
    message = _one_error(validate_deployment(Deployment(groups=groups), Hardware(gpu="H200-SXM"),
                                             sglang_version="0.5.23", model="m"))
    assert "b[0] and a[0] both use GPU 1 on node 0" in message


def test_two_listeners_on_one_port_are_refused_including_the_router():
    deployment, hardware = single(ServerConfig(tp_size=2), replicas=2, router=RouterConfig(port=30002))
    message = _one_error(validate_deployment(deployment, hardware, sglang_version="0.5.23", model="m"))
    assert "worker[1] HTTP and the router all listen on 127.0.0.1:30002" in message
    groups = [WorkerGroup(name="a", base_port=30001, server=ServerConfig(tp_size=2)),
              WorkerGroup(name="b", base_port=30001, server=ServerConfig(tp_size=2))]
    message = _one_error(validate_deployment(Deployment(groups=groups), Hardware(gpu="H200-SXM"),
                                             sglang_version="0.5.23", model="m"))
    assert "a[0] HTTP and b[0] HTTP all listen on 127.0.0.1:30001" in message


def test_unknown_version_is_an_issue_not_an_exception(coding_final):
    message = _one_error(validate_scenario(coding_final, sglang_version="0.4.0"))
    assert message.startswith("sglang_version: no flag catalogue for sglang 0.4.0")


def test_router_extra_flags_are_checked_against_the_router_catalogue(coding_final):
    router = RouterConfig(extra={"--polcy": "random", "--worker-urls": ["http://x:1"]})
    deployment, hardware = single(ServerConfig(tp_size=2), replicas=2, router=router)
    found = _errors(validate_deployment(deployment, hardware, sglang_version="0.5.23", model="m"))
    assert any("unknown flag --polcy" in message and "--policy" in message for message in found)
    assert any("--worker-urls is set by the renderer" in message for message in found)


def test_every_curated_replacement_works_where_the_old_flag_is_refused():
    for replacement in REPLACEMENTS.values():
        for version in catalogue_versions():
            if version_key(version) >= version_key(replacement.refused_from):
                catalogue = load_catalogue(version)
                assert all(flag in catalogue for flag in replacement.requires), (replacement.flag, version)
