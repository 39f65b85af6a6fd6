"""FP8 without a quality result: the candidate says "adopt only after a quality check", and `auto` gates it.

Casebook case 1 round 2: "Quality verification must be done concurrently. Quantization loss might not be
visible in general conversations but can appear in code" (50 blind code cases before FP8 was adopted).
"""

from __future__ import annotations

import msgspec

from plugins.techniques.quantization import Quantization
from service import QualityResult
from service.engine import check_quality
from service.engine.quality import gate_required
from service.plugin_host import PluginHost
from tests.unit.techniques.scenarios import context, deployment, scenario

FP8 = Quantization()
MODEL = "Qwen/Qwen3.6-35B-A3B"


def moe_on_h100(quality: list[QualityResult] | None = None):
    scen = scenario(MODEL, "H100-SXM", 2, deployment(MODEL, tp=2), clients=40)
    return context(msgspec.structs.replace(scen, quality=quality or []))


def test_fp8_without_a_quality_result_is_flagged_for_a_check() -> None:
    [delta] = FP8.propose(moe_on_h100())
    assert delta.quality_check is not None and delta.quality_check.startswith("adopt only after a quality check")
    assert f"no quality result for '{MODEL}:quantization'" in delta.quality_check


def test_a_passing_result_clears_the_flag_and_a_failing_one_keeps_it() -> None:
    passed = QualityResult(subject=f"{MODEL}:fp8", metrics={"accuracy": 0.91}, acceptable=True)
    assert FP8.propose(moe_on_h100([passed]))[0].quality_check is None
    failed = msgspec.structs.replace(passed, acceptable=False)
    assert "did not pass" in (FP8.propose(moe_on_h100([failed]))[0].quality_check or "")


def test_the_auto_playbook_gates_fp8_on_a_quality_result() -> None:
    auto = PluginHost().components("playbook")["auto"]
    ctx = moe_on_h100()
    [delta] = FP8.propose(ctx)
    assert gate_required(delta, auto.require_quality_for)
    verdict = check_quality(delta, ctx.scenario, ctx.scenario.quality, auto.quality_tolerance)
    assert not verdict.passed and "no quality result" in verdict.reason
