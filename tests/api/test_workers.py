"""Durable workers: reaping a dead worker's job, resuming after its last committed round, graceful release."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from service.domain import JobState, Round, RoundState, SkippedStep
from service.engine import JobEvent
from service.store import EventRecord, NewJob, Store
from service.workers.executor import StoreJournal, skipped_steps
from service.workers.pool import JobWorkers, WorkerSettings
from service.workers.thread_loop import run_on_own_loop
from tests.api.fakes import FakeExecutor

pytestmark = pytest.mark.anyio
FAST = WorkerSettings(slots=2, lease_seconds=1.0, heartbeat_seconds=0.1, poll_seconds=0.02, reap_every_seconds=0.2)


async def _until(predicate, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition never became true"
        await asyncio.sleep(0.02)


async def test_a_dead_workers_job_resumes_after_its_last_committed_round(store: Store) -> None:
    job, _ = await store.create_job(NewJob(playbook="coding-assistant", runner="simulator", request={}))
    await store.claim_job("dead-worker", 0.05)
    finished = Round(index=0, technique="chunked_prefill", delta=None, state=RoundState.FINISHED,
                     finished_at=datetime(2026, 1, 1, tzinfo=UTC))
    await store.record_round(job.id, "dead-worker", finished)
    await store.record_round(job.id, "dead-worker", Round(index=1, technique="fp8", delta=None,
                                                          state=RoundState.RUNNING))
    workers = await _take_over(store, job.id, FakeExecutor(rounds=3))
    rounds = await store.list_rounds(job.id)
    assert [(r.index, r.state, r.retry_of) for r in rounds] == [
        (0, RoundState.FINISHED, None), (1, RoundState.INTERRUPTED, None),
        (2, RoundState.FINISHED, 1), (3, RoundState.FINISHED, None)]
    assert rounds[0] == finished  # committed rounds are kept exactly
    assert (await store.get_job(job.id)).attempt == 2
    assert workers.metrics.reaped._value.get() == 1


async def test_a_resumed_job_is_handed_the_steps_its_journal_recorded_as_skipped(store: Store) -> None:
    job, _ = await store.create_job(NewJob(playbook="coding-assistant", runner="simulator", request={}))
    await store.claim_job("dead-worker", 0.05)
    journal = StoreJournal(store, job.id, "dead-worker")
    await journal.record_round(Round(index=0, technique="baseline", delta=None, state=RoundState.FINISHED,
                                     finished_at=datetime(2026, 1, 1, tzinfo=UTC)))
    main = JobEvent(kind="step_skipped", job_id=job.id, technique="grammar", message="no structured output")
    branch = JobEvent(kind="step_skipped", job_id=job.id, technique="hicache", line=3,
                      message="on the branch from round 3: below break-even")
    for event in (main, branch):
        await journal.record_event(event)
    executor = FakeExecutor(rounds=2)
    await _take_over(store, job.id, executor)
    assert executor.jobs[-1].skipped == [
        SkippedStep(technique="grammar", reason="no structured output"),
        SkippedStep(technique="hicache", reason="on the branch from round 3: below break-even", line=3)]


async def test_skips_journaled_before_they_carried_their_line_are_read_by_their_reason() -> None:
    def event(i: int, technique: str, message: str, **body: object) -> EventRecord:
        return EventRecord(id=i, job_id="j", kind="step_skipped", created_at=0.0,
                           body={"technique": technique, "message": message, **body})

    old = [event(1, "grammar", "no structured output"),
           event(2, "hicache", "on the branch from round 3: below break-even"),
           event(3, "hicache", "on the branch from round 3: below break-even"),  # judged again after a restart
           event(4, "radix_cache", "on the branch from round 5: on", line=5)]
    assert skipped_steps(old) == [
        SkippedStep(technique="grammar", reason="no structured output"),
        SkippedStep(technique="hicache", reason="on the branch from round 3: below break-even", line=3),
        SkippedStep(technique="radix_cache", reason="on the branch from round 5: on", line=5)]


async def test_stopping_hands_running_jobs_back_to_the_queue(store: Store) -> None:
    job, _ = await store.create_job(NewJob(playbook="coding-assistant", runner="simulator", request={}))
    workers = JobWorkers(store, FakeExecutor(rounds=100, round_seconds=0.2), settings=FAST)
    await workers.start()
    await _until(lambda: _has_round(store, job.id, 1, RoundState.RUNNING))
    await workers.stop()
    released = await store.get_job(job.id)
    assert released.state == JobState.QUEUED and released.lease_owner is None
    rounds = await store.list_rounds(job.id)
    assert rounds[-1].state == RoundState.INTERRUPTED and rounds[0].state == RoundState.FINISHED
    kinds = [e.kind for e in await store.events_after(job.id)]
    assert kinds[-2:] == ["round_finished", "job_interrupted"]


async def test_a_cancel_seen_by_heartbeat_stops_a_job_run_by_another_instance(store: Store) -> None:
    job, _ = await store.create_job(NewJob(playbook="coding-assistant", runner="simulator", request={}))
    workers = JobWorkers(store, FakeExecutor(rounds=100, round_seconds=0.2), settings=FAST)
    await workers.start()
    try:
        await _until(lambda: _has_round(store, job.id, 0, RoundState.RUNNING))
        await store.request_cancel(job.id)  # as an API call on another instance would
        await _until(lambda: _state_is(store, job.id, JobState.CANCELLED))
    finally:
        await workers.stop()
    report = (await store.get_job(job.id)).report
    assert report["job"]["state"] == "cancelled" and report["job"]["stop_reason"] == "cancelled by a user"
    assert [r["index"] for r in report["rounds"]] == [0]  # the round cut off by the cancel is in the report
    assert (await store.list_rounds(job.id))[0].state == RoundState.INTERRUPTED


async def test_own_loop_runs_in_another_thread_and_carries_cancellation() -> None:
    import threading

    main = threading.get_ident()
    cleaned = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def slow() -> int:
        assert threading.get_ident() != main
        try:
            await asyncio.sleep(30)
        finally:
            loop.call_soon_threadsafe(cleaned.set)
        return 1

    async def quick() -> int:
        return threading.get_ident()

    assert await run_on_own_loop(quick) != main
    task = asyncio.create_task(run_on_own_loop(slow))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(cleaned.wait(), 2)


async def _take_over(store: Store, job_id: str, executor: FakeExecutor) -> JobWorkers:
    """Once the dead worker's lease runs out, new workers run `job_id` with `executor` until it succeeds."""
    await asyncio.sleep(0.1)
    workers = JobWorkers(store, executor, settings=FAST)
    await workers.start()
    try:
        await _until(lambda: _state_is(store, job_id, JobState.SUCCEEDED))
    finally:
        await workers.stop()
    return workers


async def _state_is(store: Store, job_id: str, state: JobState) -> bool:
    return (await store.get_job(job_id)).state == state


async def _has_round(store: Store, job_id: str, index: int, state: RoundState) -> bool:
    return any(r.index == index and r.state == state for r in await store.list_rounds(job_id))
