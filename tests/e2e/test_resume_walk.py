"""A resumed `auto` job walks on as the uninterrupted one did: the same rounds, decisions, skipped steps and final
deployment, whether it stopped in a technique's sweep, right after a kept change that reopens an earlier step,
or after a kept change that would make a step skipped before it apply."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from service.domain import SkippedStep
from service.engine import MemoryJournal, TuningEngine, TuningOutcome, parts_from_host
from tests.e2e.untuned import A100_27B_TP4, GLM_AIR_B200, HOST, L40S_TP4, auto, build

pytestmark = pytest.mark.slow


def _engine(journal: MemoryJournal, data: dict[str, Any] = L40S_TP4) -> TuningEngine:
    playbook, scenario = auto(repeats=1), build(data)
    return TuningEngine(parts_from_host(HOST, playbook, scenario, runner="simulated"), playbook, scenario, seed=0,
                        journal=journal)


def _walk(outcome: TuningOutcome) -> list[tuple[int, str, str, str | None]]:
    return [(r.index, r.technique, r.delta.summary if r.delta else "", r.decision.verdict.value if r.decision else None)
            for r in outcome.job.rounds]


def test_a_resumed_job_neither_repeats_a_technique_nor_forgets_a_reopened_step() -> None:
    whole = MemoryJournal()
    uninterrupted = asyncio.run(_engine(whole).run())
    walk = _walk(uninterrupted)
    techniques = [t for _, t, _, _ in walk]
    # The job this pins: chunked prefill sweeps over rounds 2-3 (mixed chunk at the L40S's default 4096 kept,
    # 2048 rolled back), EAGLE3 is kept and reopens parallelism, whose kept TP2 x 2 is split once more: on PCIe
    # GPUs the 9B's TP1 (37% of an L40S) is measured where its KV fits, and rolled back. The replicas are
    # routed cache_aware: the 400-token system prompt makes 0.38 of the prompts' tokens shared.
    eagle = techniques.index("speculative_decoding")
    assert techniques[eagle + 1] == "parallelism" and techniques.count("parallelism") == 3
    assert [d for _, t, d, _ in walk[eagle + 1:] if t == "parallelism"] == [
        "TP2 x 2 + cache_aware router (balance-abs-threshold 32)",
        "TP1 x 4 + cache_aware router (balance-abs-threshold 16)"]
    assert techniques[2:4] == ["chunked_prefill"] * 2 and walk[2][3] in ("accept", "keep_tradeoff")
    # Stopped after the sweep's kept step (a resumed walk once split the chunked deployment again first), and
    # right after EAGLE3 was kept (the reopened parallelism step is still owed).
    for cut in (3, eagle + 1):
        history = whole.history(before_round=cut)
        resumed = asyncio.run(_engine(MemoryJournal()).resume(history, whole.skipped(before_round=cut)))
        assert _walk(resumed) == walk, f"resumed before round {cut}"
        assert resumed.final.deployment == uninterrupted.final.deployment
        assert resumed.skipped == uninterrupted.skipped
    # A journal of a job resumed before skips were kept can record a skip of a step that then ran on the same
    # line (chunked prefill, mid-sweep): the rounds win, and the sweep goes on.
    stale = SkippedStep(technique="chunked_prefill", reason="judged again before the restart")
    resumed = asyncio.run(_engine(MemoryJournal()).resume(whole.history(before_round=3),
                                                         [*whole.skipped(before_round=3), stale]))
    assert _walk(resumed) == walk


# The B200 MoE job with a median ITL target of 5.5 ms: TP8's 3.2 ms on the BF16 weights leaves under half of
# it to spare, so smaller TP (which raises ITL) is skipped; FP8's 2.2 ms leaves more than half.
GLM_AIR_B200_TIGHT_ITL = {**GLM_AIR_B200, "slo": {"ttft_p95_ms": 3000, "itl_median_ms": 5.5}}


def test_a_step_skipped_before_a_restart_is_not_judged_again_on_the_resumed_deployment() -> None:
    whole = MemoryJournal()
    uninterrupted = asyncio.run(_engine(whole, GLM_AIR_B200_TIGHT_ITL).run())
    walk = _walk(uninterrupted)
    # The job this pins: FP8 is kept; parallelism was skipped before it, for the ITL headroom of the BF16 weights.
    fp8 = next(i for i, t, d, v in walk if t == "quantization" and v == "accept")
    assert any("headroom" in s.reason for s in whole.skipped(before_round=fp8) if s.technique == "parallelism")
    cut = fp8 + 1
    # Resumed from its rounds alone right after FP8 was kept, the job judges parallelism again on the FP8
    # weights and runs it.
    forgetful = asyncio.run(_engine(MemoryJournal(), GLM_AIR_B200_TIGHT_ITL).resume(whole.history(before_round=cut)))
    assert "parallelism" in [t for _, t, _, _ in _walk(forgetful)[cut:]]
    # With the journal's skipped steps it ends as the uninterrupted job did.
    resumed = asyncio.run(_engine(MemoryJournal(), GLM_AIR_B200_TIGHT_ITL).resume(
        whole.history(before_round=cut), whole.skipped(before_round=cut)))
    assert _walk(resumed) == walk
    assert resumed.skipped == uninterrupted.skipped
    assert resumed.final.deployment == uninterrupted.final.deployment


def test_a_job_stopped_as_a_branch_starts_does_not_judge_the_branch_s_skipped_steps_again() -> None:
    whole = MemoryJournal()
    uninterrupted = asyncio.run(_engine(whole, A100_27B_TP4).run())
    # The job this pins: a branch skips steps before its first round; stopped there, the journal has the
    # skips and no round on the branch yet.
    first = next(r for r in uninterrupted.job.rounds if r.line is not None)
    passed = {(s.technique, s.line) for s in whole.skipped(before_round=first.index) if s.line == first.line}
    assert passed
    again = MemoryJournal()
    resumed = asyncio.run(_engine(again, A100_27B_TP4).resume(
        whole.history(before_round=first.index), whole.skipped(before_round=first.index)))
    assert not passed & {(s.technique, s.line) for s in again.skipped()}, "a skipped step was judged again"
    assert _walk(resumed) == _walk(uninterrupted)
    assert resumed.skipped == uninterrupted.skipped
    assert resumed.final.deployment == uninterrupted.final.deployment
