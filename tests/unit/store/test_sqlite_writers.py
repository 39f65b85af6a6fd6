"""SQLite under several writer processes: lock contention waits on the busy timeout, never surfaces."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
from pathlib import Path

from service.domain import JobState, Round, RoundState
from service.store import NewJob, open_store

WRITERS = 8
SECONDS = float(os.environ.get("SGLANG_TUNER_WRITER_SECONDS", "3"))


def _writer(db: str, name: str, seconds: float, errors: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    async def work() -> int:
        store = open_store(db)
        done = 0
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                await store.create_job(NewJob(playbook="p", runner="r", request={"w": name, "n": done}))
                job = await store.claim_job(name, 30)
                if job is not None:
                    await store.record_round(job.id, name, Round(index=0, technique="t", delta=None,
                                                                 state=RoundState.RUNNING))
                    await store.finish_job(job.id, name, JobState.SUCCEEDED, "done")
                done += 1
        finally:
            await store.close()
        return done
    try:
        errors.put(("ok", asyncio.run(work())))
    except Exception as exc:  # noqa: BLE001 - report every failure to the parent
        errors.put(("error", repr(exc)))


def test_eight_writer_processes_never_see_a_lock_error(tmp_path: Path) -> None:
    db = str(tmp_path / "tuner.db")

    async def prepare() -> None:
        store = open_store(db)
        await store.migrate()
        await store.close()
    asyncio.run(prepare())
    ctx = multiprocessing.get_context("fork")
    results: multiprocessing.Queue = ctx.Queue()  # type: ignore[type-arg]
    workers = [ctx.Process(target=_writer, args=(db, f"w{n}", SECONDS, results)) for n in range(WRITERS)]
    for process in workers:
        process.start()
    outcomes = [results.get(timeout=SECONDS + 60) for _ in workers]
    for process in workers:
        process.join(timeout=10)
    assert [o for o in outcomes if o[0] == "error"] == []
    assert sum(count for _, count in outcomes) > WRITERS

    async def count() -> dict[JobState, int]:
        store = open_store(db)
        try:
            return await store.count_jobs_by_state()
        finally:
            await store.close()
    counts = asyncio.run(count())
    assert counts[JobState.RUNNING] == 0 and counts[JobState.SUCCEEDED] > 0
