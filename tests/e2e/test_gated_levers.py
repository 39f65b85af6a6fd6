"""A job that ends short of its SLO names the change the quality gate held back, and what it would do.

Qwen3.6-4B BF16 on one 24 GB L4 decodes chat at 8 streams at about 41 ms a token: its weights are read every step
from a GPU with a tenth of an H100's bandwidth. More replicas do not shorten that; FP8 weights halve it. The `auto`
playbook requires a quality result before FP8 (casebook case 1 round 2), so without one FP8 is never run, and the
report must say that this is the lever left, what unlocks it, and its simulated effect, labelled as simulated.
"""

from __future__ import annotations

import re

import pytest

from service import JobState
from tests.e2e.untuned import CHAT, NEEDS_SIMULATED_CASEBOOK, build, job, playbook, scenario_data

pytestmark = NEEDS_SIMULATED_CASEBOOK

CHAT_4B_L4 = scenario_data("chat-4b-one-l4", model="Qwen/Qwen3.6-4B", gpu="L4", gpus=1, tp=1, workload=CHAT,
                           slo={"itl_median_ms": 25})
GATED = playbook("fp8-gated", "quantization", require_quality_for=["quantization"])


def test_the_held_back_fp8_is_named_with_its_unlock_and_its_simulated_effect() -> None:
    outcome = job("gated-fp8-4b-l4", GATED, build(CHAT_4B_L4))
    report = outcome.report
    assert report.job.state == JobState.SLO_NOT_MET.value
    [fp8] = [r for r in report.rounds if r.technique == "quantization"]
    assert fp8.result is None and fp8.repeats == 0  # never run: no GPU time spent on it
    [line] = [h for h in report.headline if h.startswith("`FP8")]
    assert f"(round {fp8.index}) was never run: no quality result for 'Qwen/Qwen3.6-4B:quantization'" in line
    assert "add a passing one to the scenario's `quality` list" in line
    assert "simulated (aiconfigurator cost model), not measured" in line
    assert "it would meet every SLO target" in line
    before, after = (float(x) for x in re.search(r"itl_median_ms ([\d.]+)ms -> ([\d.]+)ms against 25ms", line).groups())
    assert before > 25 > after and after < 0.6 * before  # FP8 halves the weights read per token


def test_nothing_is_said_when_the_slo_is_met_or_the_change_was_measured() -> None:
    met = job("gated-fp8-4b-l4-met", GATED, build(CHAT_4B_L4, slo={"itl_median_ms": 60}))
    assert met.report.job.state == JobState.SUCCEEDED.value
    assert not [h for h in met.report.headline if "was never run" in h]
    checked = [{"subject": "Qwen/Qwen3.6-4B:fp8", "metrics": {}, "acceptable": True,
                "note": "blind evaluation"}]
    measured = job("gated-fp8-4b-l4-checked", GATED, build(CHAT_4B_L4, quality=checked))
    [fp8] = [r for r in measured.report.rounds if r.technique == "quantization"]
    assert fp8.result is not None
    assert not [h for h in measured.report.headline if "was never run" in h]


@pytest.mark.parametrize("reason", ["quality failed for 'Qwen/Qwen3.6-4B:fp8'"])
def test_a_change_whose_quality_check_failed_is_not_offered(reason: str) -> None:
    failed = [{"subject": "Qwen/Qwen3.6-4B:fp8", "metrics": {}, "acceptable": False}]
    outcome = job("gated-fp8-4b-l4-failed", GATED, build(CHAT_4B_L4, quality=failed))
    [fp8] = [r for r in outcome.report.rounds if r.technique == "quantization"]
    assert fp8.reasons[0].startswith(reason)
    assert not [h for h in outcome.report.headline if "was never run" in h]
