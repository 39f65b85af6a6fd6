"""Applying deltas to scenarios, and the quality gate's judgement of user-supplied results."""

from __future__ import annotations

import msgspec
import pytest

from service import ConfigDelta, QualityResult, RouterConfig, ServerConfig, WorkerGroup
from service.engine import DeltaError, apply_delta, check_quality, delta_key
from tests.unit.engine.fakes import scenario


def test_flags_apply_to_the_named_roles_only() -> None:
    base = scenario()
    pd = msgspec.structs.replace(base.deployment, groups=[
        WorkerGroup(name="p", role="prefill", server=ServerConfig(tp_size=8)),
        WorkerGroup(name="d", role="decode", server=ServerConfig(tp_size=8))])
    changed = apply_delta(msgspec.structs.replace(base, deployment=pd),
                          ConfigDelta(technique="t", summary="s", set_server={"chunked_prefill_size": 16384},
                                      roles=["prefill"]))
    assert [g.server.chunked_prefill_size for g in changed.deployment.groups] == [16384, None]


def test_none_restores_sglang_default_and_input_is_untouched() -> None:
    base = apply_delta(scenario(), ConfigDelta(technique="t", summary="on", set_server={
        "speculative_algorithm": "EAGLE3", "speculative_num_steps": 5}))
    off = apply_delta(base, ConfigDelta(technique="t", summary="off", set_server={
        "speculative_algorithm": None, "speculative_num_steps": None}))
    assert off.deployment.groups[0].server.speculative_algorithm is None
    assert base.deployment.groups[0].server.speculative_num_steps == 5


def test_unknown_or_mistyped_setting_is_an_error_naming_it() -> None:
    with pytest.raises(DeltaError, match="chunked_prefil"):
        apply_delta(scenario(), ConfigDelta(technique="t", summary="s", set_server={"chunked_prefil": 1}))
    with pytest.raises(DeltaError, match="chunked"):
        apply_delta(scenario(), ConfigDelta(technique="t", summary="s", set_server={"chunked_prefill_size": "big"}))


def test_cli_spelled_flags_go_to_extra() -> None:
    changed = apply_delta(scenario(), ConfigDelta(technique="t", summary="s", set_server={"--enable-mixed-chunk": True}))
    assert changed.deployment.groups[0].server.extra == {"--enable-mixed-chunk": True}


def test_model_switch_drops_a_draft_not_known_for_the_new_model_and_client_concurrency_moves_the_bench() -> None:
    base = apply_delta(scenario(), ConfigDelta(technique="t", summary="s", set_server={
        "speculative_draft_model_path": "org/big-27B-eagle3"}))
    changed = apply_delta(base, ConfigDelta(technique="m", summary="s", model="org/small-9B", client_concurrency=512,
                                            router=RouterConfig(policy="round_robin")))
    server = changed.deployment.groups[0].server
    # A draft is trained for one target: no "org/small-9B-eagle3" is made up from the new model's name
    # (tests/unit/techniques/test_draft_models.py: a model with a known draft takes it).
    assert (changed.model, server.model_path, server.speculative_draft_model_path) == (
        "org/small-9B", "org/small-9B", None)
    assert changed.bench.max_concurrency == 512
    assert changed.deployment.router.policy == "round_robin"


def test_delta_key_ignores_wording_but_not_content() -> None:
    a = ConfigDelta(technique="t", summary="one", set_server={"page_size": 64})
    assert delta_key(a) == delta_key(msgspec.structs.replace(a, summary="two"))
    assert delta_key(a) != delta_key(msgspec.structs.replace(a, set_server={"page_size": 32}))


def test_delta_key_leaves_out_how_a_candidate_is_judged() -> None:
    # `simplifies` says how a flat result is read, not what runs: a journal written before the field existed
    # names the same candidate, so a resumed job does not run it again.
    removal = ConfigDelta(technique="hicache", summary="remove HiCache", set_server={"enable_hierarchical_cache": None},
                          simplifies=True)
    assert delta_key(removal) == delta_key(msgspec.structs.replace(removal, simplifies=False))
    assert "simplifies" not in delta_key(removal)
    assert delta_key(removal).startswith('hicache:{"artifacts":{},"client_concurrency":null,"deployment":null,')


QUALITY = [QualityResult(subject="org/big-27B", metrics={"accuracy": 0.941, "rouge_l": 0.412}),
           QualityResult(subject="org/small-9B", metrics={"accuracy": 0.933, "rouge_l": 0.398}),
           QualityResult(subject="org/tiny-4B", metrics={"accuracy": 0.897, "rouge_l": 0.361})]


def test_quality_within_tolerance_passes_and_a_bigger_drop_fails() -> None:
    scen = scenario(quality=QUALITY)
    nine = check_quality(ConfigDelta(technique="model_selection", summary="s", model="org/small-9B"), scen, QUALITY,
                         0.02)
    four = check_quality(ConfigDelta(technique="model_selection", summary="s", model="org/tiny-4B"), scen, QUALITY,
                         0.02)
    assert nine.passed and "0.941 -> 0.933" in nine.reason
    assert not four.passed and "rouge_l drops 0.051" in four.reason


def test_explicit_flag_decides_for_quantization() -> None:
    results = [QualityResult(subject="org/big-27B:fp8", metrics={"equivalent": 39}, acceptable=False,
                             note="code eval regressed")]
    verdict = check_quality(ConfigDelta(technique="quantization", summary="s", set_server={"quantization": "fp8"}),
                            scenario(), results, 0.02)
    assert not verdict.passed and "code eval regressed" in verdict.reason
