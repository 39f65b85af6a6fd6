"""A starting deployment whose KV pool cannot hold the workload's longest prompts fails once, saying why and how.

Qwen3.6-9B BF16 on one 24 GB L4 leaves a KV pool of about 3,900 tokens; a chat workload whose prompts reach
3,000 tokens under an 800-token system prompt has a few that SGLang refuses (`validate_input_length`) on every
launch. Measuring it four times would change nothing, so the job fails after one attempt, names the pool, and
lists the ways to grow it.
"""

from __future__ import annotations

from service import JobState
from tests.e2e.untuned import CHAT, NEEDS_SIMULATED_CASEBOOK, build, job, playbook, scenario_data

pytestmark = NEEDS_SIMULATED_CASEBOOK

CHAT_9B_L4 = scenario_data("chat-9b-one-l4", model="Qwen/Qwen3.6-9B", gpu="L4", gpus=1, tp=1, workload=CHAT,
                           slo={"itl_median_ms": 60})


def test_prompts_past_the_pool_fail_the_start_once_with_the_pool_and_the_fixes() -> None:
    report = job("pool-refusals-9b-l4", playbook("spec", "speculative_decoding"), build(CHAT_9B_L4)).report
    assert report.job.state == JobState.FAILED.value
    assert [r.technique for r in report.rounds] == ["baseline"]  # one attempt: the same launch refuses the same
    reason = report.job.stop_reason
    assert reason.startswith("the starting deployment cannot serve the workload: ")
    assert "requests refused: prompt longer than the" in reason and "tokens SGLang admits (KV pool of" in reason
    for fix in ("more GPUs per instance", "an FP8 KV cache", "a smaller --chunked-prefill-size",
                "a larger --mem-fraction-static"):
        assert fix in reason
    assert report.final is None and (report.slo is None or not report.slo.met)
