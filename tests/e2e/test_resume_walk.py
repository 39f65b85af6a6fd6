"""A resumed `auto` job walks on as the uninterrupted one did: the same rounds, decisions and final deployment,
whether it stopped in a technique's sweep or right after a kept change that reopens an earlier step."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from service.engine import MemoryJournal, TuningEngine, TuningOutcome, parts_from_host
from tests.e2e.untuned import HOST, L40S_TP4, auto, build

pytestmark = pytest.mark.slow


def _engine(journal: MemoryJournal) -> TuningEngine:
    playbook, scenario = auto(repeats=1), build(L40S_TP4)
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
    # The job this pins: chunked prefill sweeps over rounds 2-4, EAGLE3 is kept and reopens parallelism.
    eagle = techniques.index("speculative_decoding")
    assert techniques[eagle + 1] == "parallelism" and techniques.count("parallelism") == 2
    assert techniques[2:5] == ["chunked_prefill"] * 3
    # Stopped after the sweep's kept step (a resumed walk once split the chunked deployment again first), and
    # right after EAGLE3 was kept (the reopened parallelism step is still owed).
    for cut in (4, eagle + 1):
        history = [msgspec.structs.replace(r) for r in whole.history() if r.index < cut]
        resumed = asyncio.run(_engine(MemoryJournal()).resume(history))
        assert _walk(resumed) == walk, f"resumed before round {cut}"
        assert resumed.final.deployment == uninterrupted.final.deployment
