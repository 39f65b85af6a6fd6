"""The store contract, run against SQLite and (when SGLANG_TUNER_TEST_PG_URL is set) PostgreSQL."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from service.domain import (
    Calibration,
    CalibrationKey,
    Decision,
    JobState,
    Parameter,
    Pattern,
    Round,
    RoundState,
    Verdict,
)
from service.store import (
    BadCursorError,
    CatchUp,
    DuplicateScheduleError,
    FinishedRoundError,
    FireOutcome,
    IdempotencyConflictError,
    LeaseLostError,
    NewJob,
    NewSchedule,
    Scope,
    Store,
    open_store,
)

PG_URL = os.environ.get("SGLANG_TUNER_TEST_PG_URL")
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.skipif(
    not PG_URL, reason="set SGLANG_TUNER_TEST_PG_URL (scripts/ci_postgres.sh prints one)"))]

pytestmark = pytest.mark.anyio


class Clock:
    """A clock the test moves by hand, so lease expiry needs no sleeping."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        self.now += 0.001  # strictly increasing, like real time between calls
        return self.now


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        db = open_store(str(tmp_path / "tuner.db"), clock=clock)
    else:
        db = open_store(PG_URL or "", clock=clock)
        async with db.engine.begin() as conn:
            await conn.execute(text("DROP SCHEMA public CASCADE"))
            await conn.execute(text("CREATE SCHEMA public"))
    await db.migrate()
    yield db
    await db.close()


def job(n: int = 0, *, resource: str | None = None, key: str | None = None) -> NewJob:
    return NewJob(playbook="coding-assistant", runner="simulator", request={"n": n}, resource=resource,
                  idempotency_key=key)


def running_round(index: int) -> Round:
    return Round(index=index, technique="chunked_prefill", delta=None, state=RoundState.RUNNING,
                 started_at=datetime(2026, 1, 1, tzinfo=UTC))


def finished_round(index: int, verdict: Verdict = Verdict.ACCEPT) -> Round:
    decision = Decision(verdict=verdict, pattern=Pattern.THROUGHPUT_UP_LATENCY_DOWN, reasons=["ttft p95 fell"])
    return Round(index=index, technique="chunked_prefill", delta=None, state=RoundState.FINISHED, decision=decision)


async def test_migrations_are_idempotent_and_current(store: Store) -> None:
    await store.migrate()
    assert await store.schema_is_current()
    assert await store.ping()


async def test_created_job_is_queued_with_an_event(store: Store) -> None:
    created, fresh = await store.create_job(job(1))
    assert fresh and created.state == JobState.QUEUED and created.request == {"n": 1}
    assert await store.get_job(created.id) == created
    assert [e.kind for e in await store.events_after(created.id)] == ["job_queued"]
    assert await store.get_job("job_missing") is None


async def test_replayed_idempotency_key_returns_the_same_job(store: Store) -> None:
    first, _ = await store.create_job(job(1, key="abc"))
    again, fresh = await store.create_job(job(1, key="abc"))
    assert again.id == first.id and not fresh
    with pytest.raises(IdempotencyConflictError):
        await store.create_job(job(2, key="abc"))
    assert len((await store.list_jobs()).items) == 1


async def test_concurrent_first_attempts_with_one_key_make_one_job(store: Store) -> None:
    results = await asyncio.gather(*(store.create_job(job(1, key="race")) for _ in range(6)))
    assert len({created.id for created, _ in results}) == 1
    assert sum(fresh for _, fresh in results) == 1


async def test_pages_cover_every_job_once_newest_first(store: Store) -> None:
    ids = [(await store.create_job(job(n)))[0].id for n in range(7)]
    seen, cursor = [], None
    while True:
        page = await store.list_jobs(limit=3, cursor=cursor)
        seen += [item.id for item in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == list(reversed(ids))
    with pytest.raises(BadCursorError):
        await store.list_jobs(cursor="not-a-cursor")


async def test_list_filters_by_state_and_playbook(store: Store) -> None:
    await store.create_job(job(1))
    await store.create_job(NewJob(playbook="rag", runner="simulator", request={}))
    await store.claim_job("w", 30)
    assert [j.request for j in (await store.list_jobs(state=JobState.RUNNING)).items] == [{"n": 1}]
    assert [j.playbook for j in (await store.list_jobs(playbook="rag")).items] == ["rag"]
    assert (await store.list_jobs(runner="other")).items == []


async def test_claim_takes_the_oldest_and_holds_its_resource(store: Store) -> None:
    first, _ = await store.create_job(job(1, resource="gpu-host-a"))
    second, _ = await store.create_job(job(2, resource="gpu-host-a"))
    other, _ = await store.create_job(job(3, resource="gpu-host-b"))
    claimed = await store.claim_job("w1", 30)
    assert claimed is not None and claimed.id == first.id and claimed.state == JobState.RUNNING
    assert claimed.attempt == 1 and claimed.lease_owner == "w1"
    assert (await store.claim_job("w2", 30)).id == other.id  # host a is busy; host b is free
    assert await store.claim_job("w3", 30) is None
    assert await store.queue_position(await store.get_job(second.id)) == 1
    await store.finish_job(first.id, "w1", JobState.SUCCEEDED, "slo met")
    assert (await store.claim_job("w3", 30)).id == second.id


async def test_concurrent_claims_never_share_a_job_or_a_resource(store: Store) -> None:
    for n in range(4):
        await store.create_job(job(n))
    for n in range(3):
        await store.create_job(job(10 + n, resource="gpu-host-a"))
    claims = await asyncio.gather(*(store.claim_job(f"w{n}", 30) for n in range(10)))
    got = [c for c in claims if c is not None]
    assert len({c.id for c in got}) == len(got) == 5
    assert sum(c.resource == "gpu-host-a" for c in got) == 1


async def test_queue_position_counts_jobs_waiting_for_the_same_resource(store: Store) -> None:
    made = [(await store.create_job(job(n, resource="gpu-host-a")))[0] for n in range(3)]
    await store.claim_job("w", 30)
    positions = [await store.queue_position(await store.get_job(m.id)) for m in made]
    assert positions == [None, 1, 2]


async def test_heartbeat_reports_cancel_and_rejects_other_owners(store: Store) -> None:
    created, _ = await store.create_job(job(1))
    await store.claim_job("w1", 30)
    assert await store.renew_lease(created.id, "w1", 30) is False
    await store.request_cancel(created.id)
    assert await store.renew_lease(created.id, "w1", 30) is True
    with pytest.raises(LeaseLostError):
        await store.renew_lease(created.id, "w2", 30)


async def test_rounds_commit_with_events_and_finished_rounds_never_change(store: Store) -> None:
    created, _ = await store.create_job(job(1))
    await store.claim_job("w1", 30)
    await store.record_round(created.id, "w1", running_round(0))
    await store.record_round(created.id, "w1", finished_round(0))
    with pytest.raises(FinishedRoundError):
        await store.record_round(created.id, "w1", finished_round(0, Verdict.ROLLBACK))
    rounds = await store.list_rounds(created.id)
    assert [(r.index, r.state, r.decision.verdict) for r in rounds] == [(0, RoundState.FINISHED, Verdict.ACCEPT)]
    kinds = [e.kind for e in await store.events_after(created.id)]
    assert kinds == ["job_queued", "job_started", "round_started", "round_finished", "decision"]
    with pytest.raises(LeaseLostError):
        await store.record_round(created.id, "someone-else", running_round(1))


async def test_events_after_resumes_from_the_last_seen_id(store: Store) -> None:
    created, _ = await store.create_job(job(1))
    await store.claim_job("w1", 30)
    first = await store.events_after(created.id)
    await store.record_round(created.id, "w1", running_round(0))
    later = await store.events_after(created.id, after_id=first[-1].id)
    assert [e.kind for e in later] == ["round_started"]


async def test_reaping_requeues_expired_jobs_and_interrupts_their_round(store: Store, clock: Clock) -> None:
    created, _ = await store.create_job(job(1, resource="gpu-host-a"))
    await store.claim_job("dead-worker", 5)
    await store.record_round(created.id, "dead-worker", finished_round(0))
    await store.record_round(created.id, "dead-worker", running_round(1))
    assert await store.reap_stale_leases() == []  # lease still valid
    clock.now += 10
    assert await store.reap_stale_leases() == [created.id]
    requeued = await store.get_job(created.id)
    assert requeued.state == JobState.QUEUED and requeued.lease_owner is None
    assert [r.state for r in await store.list_rounds(created.id)] == [RoundState.FINISHED, RoundState.INTERRUPTED]
    with pytest.raises(LeaseLostError):
        await store.record_round(created.id, "dead-worker", finished_round(1))
    resumed = await store.claim_job("new-worker", 5)
    assert resumed.id == created.id and resumed.attempt == 2


async def test_cancel_a_queued_job_at_once_and_a_running_one_through_its_worker(store: Store) -> None:
    queued, _ = await store.create_job(job(1))
    running, _ = await store.create_job(job(2))
    await store.claim_job("w1", 30)  # takes `queued`, the older one
    cancelled = await store.request_cancel(running.id)
    assert cancelled.state == JobState.CANCELLED and cancelled.finished_at is not None
    flagged = await store.request_cancel(queued.id)
    assert flagged.state == JobState.RUNNING and flagged.cancel_requested
    await store.record_round(queued.id, "w1", running_round(0))
    done = await store.finish_job(queued.id, "w1", JobState.CANCELLED, "cancelled by a user", {"rounds": 1})
    assert done.state == JobState.CANCELLED and done.report == {"rounds": 1}
    assert (await store.list_rounds(queued.id))[0].state == RoundState.INTERRUPTED
    assert await store.request_cancel("job_missing") is None
    with pytest.raises(ValueError):
        await store.finish_job(queued.id, "w1", JobState.RUNNING, "not terminal")


async def test_counts_by_state(store: Store) -> None:
    for n in range(3):
        await store.create_job(job(n))
    await store.claim_job("w", 30)
    counts = await store.count_jobs_by_state()
    assert counts[JobState.QUEUED] == 2 and counts[JobState.RUNNING] == 1 and counts[JobState.FAILED] == 0


async def test_api_keys_are_checked_by_hash_and_revocable(store: Store) -> None:
    record, token = await store.create_api_key("ci", [Scope.WRITE, Scope.READ])
    assert record.scopes == [Scope.READ, Scope.WRITE]
    found = await store.authenticate(token)
    assert found is not None and found.id == record.id and found.allows(Scope.WRITE)
    assert not found.allows(Scope.ADMIN)
    assert await store.authenticate(token[:-2] + "xx") is None
    assert await store.authenticate("Bearer nonsense") is None
    listed = await store.list_api_keys()
    assert [k.id for k in listed] == [record.id] and listed[0].secret_hash == ""
    assert token.split("_")[-1] not in str(listed)
    assert await store.revoke_api_key(record.id) and not await store.revoke_api_key(record.id)
    assert await store.authenticate(token) is None


async def test_each_schedule_fire_is_recorded_once(store: Store) -> None:
    schedule = await store.create_schedule(NewSchedule(name="nightly", cron="0 3 * * *",
                                                       job_request={"playbook": "coding-assistant"}))
    assert schedule.catch_up == CatchUp.RUN_ONCE and schedule.enabled
    with pytest.raises(DuplicateScheduleError):
        await store.create_schedule(NewSchedule(name="nightly", cron="0 4 * * *", job_request={}))
    new = NewJob(playbook="coding-assistant", runner="simulator", request={}, schedule_id=schedule.id)
    claims = await asyncio.gather(*(store.record_fire(schedule.id, 1000.0, FireOutcome.STARTED, f"i{n}", new)
                                    for n in range(4)))
    won = [c for c in claims if c is not None]
    assert len(won) == 1 and won[0][1].schedule_id == schedule.id
    assert len((await store.list_jobs(schedule_id=schedule.id)).items) == 1
    await store.record_fire(schedule.id, 2000.0, FireOutcome.MISSED, "i0")
    fires = await store.list_fires(schedule.id)
    assert [(f.fire_at, f.outcome) for f in fires] == [(2000.0, FireOutcome.MISSED), (1000.0, FireOutcome.STARTED)]
    assert fires[1].job_id == won[0][1].id
    assert (await store.get_schedule(schedule.id)).last_fire_at == 2000.0
    assert await store.delete_schedule(schedule.id) and await store.get_schedule(schedule.id) is None


async def test_numpy_figures_in_a_round_are_stored_as_numbers(store: Store) -> None:
    import numpy as np

    created, _ = await store.create_job(job(1))
    await store.claim_job("w1", 30)
    decision = Decision(verdict=Verdict.ACCEPT, pattern=Pattern.THROUGHPUT_UP_LATENCY_DOWN, reasons=["ok"],
                        figures={"p_value": np.float64(0.01), "samples": np.int64(3)})
    await store.record_round(created.id, "w1", Round(index=0, technique="t", delta=None, state=RoundState.FINISHED,
                                                     decision=decision))
    stored = (await store.list_rounds(created.id))[0].decision.figures
    assert stored == {"p_value": 0.01, "samples": 3} and type(stored["p_value"]) is float


def _calibration(model: str, layout: str, created_at: float = 0.0) -> Calibration:
    key = CalibrationKey(model=model, gpu="H100-SXM", sglang_version="0.5.23", layout=layout)
    parameters = [Parameter(name="decode", value=1.4, stderr=0.1, lower=0.2, upper=10.0, unit="x")]
    return Calibration(key=key, parameters=parameters, cost_model="roofline", rounds=2, created_at=created_at)


async def test_calibrations_are_kept_and_listed_newest_first(store: Store, clock: Clock) -> None:
    first = await store.save_calibration(_calibration("Qwen/Qwen3.6-9B", "1x tp1"))
    clock.now += 10
    second = await store.save_calibration(_calibration("Qwen/Qwen3.6-9B", "2x tp1"))
    other = await store.save_calibration(_calibration("Qwen/Qwen3.6-27B", "1x tp2", created_at=5.0))
    assert first.id.startswith("cal_") and first.id != second.id and other.created_at == 5.0
    assert [c.id for c in await store.list_calibrations(model="Qwen/Qwen3.6-9B")] == [second.id, first.id]
    assert [c.id for c in await store.list_calibrations()] == [second.id, first.id, other.id]
    assert await store.list_calibrations(model="Qwen/Qwen3.6-9B", gpu="H200") == []
    fetched = await store.get_calibration(first.id)
    assert fetched == first and fetched.factors.decode == 1.4
    assert await store.delete_calibration(first.id) and not await store.delete_calibration(first.id)
    assert await store.get_calibration(first.id) is None


async def test_the_migrated_schema_is_the_tables_the_code_declares(store: Store) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from service.store.tables import metadata

    async with store.engine.connect() as conn:
        diff = await conn.run_sync(lambda sync: compare_metadata(MigrationContext.configure(sync), metadata))
    assert diff == []
