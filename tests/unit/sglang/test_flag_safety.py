"""Injection and dangerous flags never reach a launch argv: rendering refuses, naming the fault."""

from __future__ import annotations

import msgspec
import pytest

from service.domain import Hardware
from service.sglang import (
    DANGEROUS_FLAGS,
    RenderRefused,
    catalogue_versions,
    load_catalogue,
    render_scenario,
    router_catalogue,
    validate_argv,
)
from service.sglang.flags import ROUTER, SGLANG, SMG
from service.sglang.safety import REVIEW_PATTERN, REVIEWED_SAFE, flag_danger

from .conftest import with_extra, with_server

INJECTIONS = [
    "Qwen/Qwen3.6-27B; rm -rf /",
    "model | nc evil 1",
    "a && b",
    "$(whoami)",
    "`id`",
    "x > /etc/passwd",
    "x < /etc/shadow",
    "first\nsecond",
    "it's",
    'say "hi"',
    "back\\slash",
    "with space",
]


def _refusal(scenario, **kwargs) -> str:
    with pytest.raises(RenderRefused) as info:
        render_scenario(scenario, **kwargs)
    return str(info.value)


@pytest.mark.parametrize("value", INJECTIONS)
def test_shell_metacharacters_in_a_value_are_refused_not_quoted(coding_final, value):
    message = _refusal(with_extra(coding_final, served_model_name=value))
    assert "--served-model-name contains" in message


@pytest.mark.parametrize("value", INJECTIONS[:3])
def test_metacharacters_in_typed_fields_and_hosts_are_refused(coding_final, value):
    assert "contains" in _refusal(with_server(coding_final, speculative_draft_model_path=value))
    hosts = Hardware(gpu="H200-SXM", node_hosts=[value])
    assert "contains" in _refusal(msgspec.structs.replace(coding_final, hardware=hosts))


def test_a_smuggled_flag_in_a_value_is_refused(coding_final):
    message = _refusal(with_extra(coding_final, served_model_name="--trust-remote-code"))
    assert "starts with '-' and would be read as another flag" in message


def test_negative_numbers_are_values_not_flags(coding_final):
    launch = render_scenario(with_server(coding_final, chunked_prefill_size=-1))
    argv = launch.workers[0].argv
    assert argv[argv.index("--chunked-prefill-size") + 1] == "-1"


def test_an_abbreviated_flag_never_reaches_an_argv(coding_final):
    message = _refusal(with_extra(coding_final, trust_rem=True))
    assert "spell the flag in full: --trust-remote-code" in message


@pytest.mark.parametrize("flag", ["--trust-remote-code", "--forward-hooks", "--custom-weight-loader",
                                  "--enable-custom-logit-processor", "--config", "--tool-server",
                                  "--delete-ckpt-after-loading"])
def test_each_dangerous_flag_is_refused_unless_allowed(coding_final, flag):
    spec = load_catalogue("0.5.23").get(flag)
    value = True if spec.is_bare else ("[1]" if spec.type == "json" else "demo")
    scenario = with_extra(coding_final, **{flag[2:].replace("-", "_"): value})
    message = _refusal(scenario)
    assert f"{flag} is refused" in message and "must allow" in message
    allowed = render_scenario(scenario, allow={flag})
    assert flag in allowed.workers[0].argv


def test_dangerous_values_of_harmless_flags_need_permission(coding_final):
    scenario = with_extra(coding_final, load_format="remote")
    assert "--load-format remote is refused" in _refusal(scenario)
    assert "--load-format" in render_scenario(scenario, allow={"--load-format=remote"}).workers[0].argv


def test_validate_argv_reads_argv_as_argparse_would():
    ok = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--tp-size", "2", "--enable-metrics",
          "--bucket-time-to-first-token", "0.1", "0.5"]
    assert validate_argv(ok, sglang_version="0.5.23") == []
    smuggled = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--trust-rem", "--port", "1;id"]
    found = [str(issue) for issue in validate_argv(smuggled, sglang_version="0.5.23")]
    assert any("abbreviates --trust-remote-code" in message for message in found)
    assert any("contains ';'" in message for message in found)
    twice = ["python", "-m", "sglang.launch_server", "--tp-size", "2", "--tensor-parallel-size", "4"]
    assert any("given twice" in str(issue) for issue in validate_argv(twice, sglang_version="0.5.23"))


def test_every_flag_whose_help_hints_at_such_powers_has_been_reviewed():
    for package, catalogues in ((SGLANG, [load_catalogue(v) for v in catalogue_versions()]),
                                (ROUTER, [router_catalogue()]),
                                (SMG, [load_catalogue(v, SMG) for v in catalogue_versions(SMG)])):
        for catalogue in catalogues:
            for spec in catalogue.flags:
                if REVIEW_PATTERN.search(f"{spec.help} {spec.flag}"):
                    reviewed = spec.flag in DANGEROUS_FLAGS[package] or spec.flag in REVIEWED_SAFE[package]
                    assert reviewed, f"{package} {catalogue.version}: review {spec.flag}: {spec.help}"
                    assert (flag_danger(spec, package) is None) == (spec.flag in REVIEWED_SAFE[package])


def test_an_unreviewed_flag_with_a_risky_help_text_fails_closed():
    spec = load_catalogue("0.5.23").get("--tokenizer-mode")
    novel = msgspec.structs.replace(spec, flag="--novel-plugin", help="Import path of a python module to load.")
    danger = flag_danger(novel, SGLANG)
    assert danger is not None and danger.kind == "unreviewed"
