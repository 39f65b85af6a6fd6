"""Job queries: enqueue (idempotent), list, claim under a lease, heartbeat, cancel, finish, reap."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, case, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from service.domain import JobState
from service.store import tables as t
from service.store.codec import decode_cursor, dumps, encode_cursor, job_from_row, new_id
from service.store.core import StoreCore
from service.store.records import JobPage, JobRecord, LeaseLostError, NewJob, StoreError

_CLAIM_CANDIDATES = 20
_LISTED = [column for column in t.jobs.c if column.name != "report"]


class IdempotencyConflictError(StoreError):
    """An Idempotency-Key was replayed with a different request body."""


class JobQueries(StoreCore):
    """The job lifecycle. Every method is one transaction; claims are atomic compare-and-set."""

    async def create_job(self, new: NewJob) -> tuple[JobRecord, bool]:
        """Enqueue a job; with an idempotency key already used, return that job and False instead.

        Raises:
            IdempotencyConflictError: the key was used before for a different request.
        """
        try:
            return await self._write(lambda conn: self._create_job(conn, new))
        except IntegrityError:
            # Two first attempts raced on one key; the loser returns the winner's job.
            return await self._write(lambda conn: self._create_job(conn, new))

    async def _create_job(self, conn: AsyncConnection, new: NewJob) -> tuple[JobRecord, bool]:
        if new.idempotency_key is not None:
            row = (await conn.execute(select(t.jobs).where(t.jobs.c.idempotency_key == new.idempotency_key))).first()
            if row is not None:
                existing = job_from_row(row)
                if existing.request != new.request:
                    raise IdempotencyConflictError(
                        f"Idempotency-Key {new.idempotency_key!r} was already used for a different request")
                return existing, False
        job_id, now = new_id("job"), self.clock()
        await conn.execute(insert(t.jobs).values(
            id=job_id, kind=new.kind, playbook=new.playbook, runner=new.runner, resource=new.resource,
            state=JobState.QUEUED.value, request=dumps(new.request), idempotency_key=new.idempotency_key,
            schedule_id=new.schedule_id, created_by=new.created_by, created_at=now, cancel_requested=False,
            attempt=0))
        await self._append_event(conn, job_id, "job_queued", {"state": JobState.QUEUED.value})
        return await self._job(conn, job_id), True

    async def get_job(self, job_id: str) -> JobRecord | None:
        """One job, or None."""
        async def work(conn: AsyncConnection) -> JobRecord | None:
            row = (await conn.execute(select(t.jobs).where(t.jobs.c.id == job_id))).first()
            return job_from_row(row) if row is not None else None
        return await self._read(work)

    async def list_jobs(self, *, state: JobState | None = None, playbook: str | None = None,
                        runner: str | None = None, schedule_id: str | None = None, limit: int = 50,
                        cursor: str | None = None) -> JobPage:
        """Jobs newest first, filtered, without their reports (`report` is None); pass `next_cursor` back to get
        the following page.

        Raises:
            BadCursorError: the cursor was not issued by this service.
        """
        # Without the report: a listing never shows it, and decoding a page of reports (some 50 KB each)
        # cost 60 ms of CPU a page (BENCHMARKS.md, "HTTP service: listing jobs"). `get_job` reads it.
        query = select(*_LISTED, _queue_position_column()).order_by(t.jobs.c.created_at.desc(), t.jobs.c.id.desc()).limit(limit + 1)
        for column, value in ((t.jobs.c.state, state), (t.jobs.c.playbook, playbook),
                              (t.jobs.c.runner, runner), (t.jobs.c.schedule_id, schedule_id)):
            if value is not None:
                query = query.where(column == value)
        if cursor is not None:
            at, last_id = decode_cursor(cursor)
            query = query.where(or_(t.jobs.c.created_at < at, and_(t.jobs.c.created_at == at, t.jobs.c.id < last_id)))

        async def work(conn: AsyncConnection) -> JobPage:
            rows = (await conn.execute(query)).all()[:limit + 1]
            items = [job_from_row(row) for row in rows]
            more = len(items) > limit
            items = items[:limit]
            next_cursor = encode_cursor(items[-1].created_at, items[-1].id) if more and items else None
            # Positions come with the page (one statement): a read per queued job made a page of them slow.
            positions = {row.id: int(row.queue_position) for row in rows[:limit] if row.queue_position is not None}
            return JobPage(items=items, next_cursor=next_cursor, queue_positions=positions)
        return await self._read(work)

    async def claim_job(self, owner: str, lease_seconds: float) -> JobRecord | None:
        """Atomically move the oldest runnable queued job to running under `owner`'s lease.

        A queued job whose runner resource is held by a running job is skipped: it waits its turn.
        """
        return await self._write(lambda conn: self._claim(conn, owner, lease_seconds))

    async def _claim(self, conn: AsyncConnection, owner: str, lease_seconds: float) -> JobRecord | None:
        held = select(t.jobs.c.resource).where(t.jobs.c.state == JobState.RUNNING.value,
                                               t.jobs.c.resource.is_not(None))
        tried: list[str] = []
        for _ in range(_CLAIM_CANDIDATES):
            # One row at a time: PostgreSQL locks every row a FOR UPDATE returns, and concurrent claimers
            # skip locked rows, so locking a batch would starve them. SQLite's BEGIN IMMEDIATE serialises.
            job_id = (await conn.execute(
                select(t.jobs.c.id)
                .where(t.jobs.c.state == JobState.QUEUED.value, t.jobs.c.id.not_in(tried),
                       or_(t.jobs.c.resource.is_(None), t.jobs.c.resource.not_in(held)))
                .order_by(t.jobs.c.created_at, t.jobs.c.id)
                .limit(1)
                .with_for_update(skip_locked=True))).scalar_one_or_none()
            if job_id is None:
                return None
            tried.append(job_id)
            if await self._take(conn, job_id, owner, lease_seconds):
                job = await self._job(conn, job_id)
                await self._append_event(conn, job_id, "job_started", {"attempt": job.attempt, "owner": owner})
                return job
        return None

    async def _take(self, conn: AsyncConnection, job_id: str, owner: str, lease_seconds: float) -> bool:
        now = self.clock()
        try:
            async with conn.begin_nested():
                claimed = await conn.execute(
                    update(t.jobs)
                    .where(t.jobs.c.id == job_id, t.jobs.c.state == JobState.QUEUED.value)
                    .values(state=JobState.RUNNING.value, lease_owner=owner, lease_expires_at=now + lease_seconds,
                            heartbeat_at=now, started_at=func.coalesce(t.jobs.c.started_at, now),
                            attempt=t.jobs.c.attempt + 1))
        except IntegrityError:
            return False  # another instance took this job's runner resource a moment ago
        return claimed.rowcount == 1

    async def renew_lease(self, job_id: str, owner: str, lease_seconds: float) -> bool:
        """Extend `owner`'s lease (the heartbeat); returns whether a cancel was requested.

        Raises:
            LeaseLostError: the lease expired and the job was reaped, or another worker holds it.
        """
        async def work(conn: AsyncConnection) -> bool:
            now = self.clock()
            result = await conn.execute(
                update(t.jobs)
                .where(t.jobs.c.id == job_id, t.jobs.c.lease_owner == owner,
                       t.jobs.c.state == JobState.RUNNING.value)
                .values(lease_expires_at=now + lease_seconds, heartbeat_at=now)
                .returning(t.jobs.c.cancel_requested))
            row = result.first()
            if row is None:
                raise LeaseLostError(f"job {job_id} is no longer leased to {owner}")
            return bool(row[0])
        return await self._write(work)

    async def request_cancel(self, job_id: str) -> JobRecord | None:
        """Cancel a job: a queued one at once, a running one by flagging it for its worker."""
        async def work(conn: AsyncConnection) -> JobRecord | None:
            row = (await conn.execute(select(t.jobs).where(t.jobs.c.id == job_id))).first()
            if row is None:
                return None
            job = job_from_row(row)
            if job.state == JobState.QUEUED:
                await self._finish(conn, job_id, JobState.CANCELLED, "cancelled before it started", None)
            elif job.state == JobState.RUNNING and not job.cancel_requested:
                await conn.execute(update(t.jobs).where(t.jobs.c.id == job_id).values(cancel_requested=True))
                await self._append_event(conn, job_id, "cancel_requested", {})
            return await self._job(conn, job_id)
        return await self._write(work)

    async def finish_job(self, job_id: str, owner: str, state: JobState, stop_reason: str,
                         report: Any = None) -> JobRecord:
        """Record a job's terminal state; rounds still open are recorded as interrupted.

        Raises:
            LeaseLostError: `owner` no longer holds the job.
        """
        if not state.is_terminal():
            raise ValueError(f"{state} is not a terminal job state")

        async def work(conn: AsyncConnection) -> JobRecord:
            row = (await conn.execute(select(t.jobs.c.lease_owner, t.jobs.c.state)
                                      .where(t.jobs.c.id == job_id))).first()
            if row is None or row.lease_owner != owner or row.state != JobState.RUNNING.value:
                raise LeaseLostError(f"job {job_id} is no longer leased to {owner}")
            await self._finish(conn, job_id, state, stop_reason, report)
            return await self._job(conn, job_id)
        return await self._write(work)

    async def _finish(self, conn: AsyncConnection, job_id: str, state: JobState, stop_reason: str,
                      report: Any) -> None:
        await self._interrupt_open_rounds(conn, job_id)
        await conn.execute(update(t.jobs).where(t.jobs.c.id == job_id).values(
            state=state.value, stop_reason=stop_reason, report=None if report is None else dumps(report),
            finished_at=self.clock(), lease_owner=None, lease_expires_at=None))
        await self._append_event(conn, job_id, "job_finished", {"state": state.value, "stop_reason": stop_reason})

    async def reap_stale_leases(self) -> list[str]:
        """Requeue running jobs whose lease expired (their worker died); open rounds become interrupted.

        A job whose cancel was requested is cancelled instead of requeued. Returns the reaped job ids.
        """
        async def work(conn: AsyncConnection) -> list[str]:
            stale = (await conn.execute(
                select(t.jobs.c.id, t.jobs.c.cancel_requested)
                .where(t.jobs.c.state == JobState.RUNNING.value, t.jobs.c.lease_expires_at < self.clock())
                .with_for_update(skip_locked=True))).all()
            for job_id, cancel_requested in stale:
                if cancel_requested:
                    await self._finish(conn, job_id, JobState.CANCELLED, "cancelled while its worker was down", None)
                    continue
                interrupted = await self._interrupt_open_rounds(conn, job_id)
                await conn.execute(update(t.jobs).where(t.jobs.c.id == job_id).values(
                    state=JobState.QUEUED.value, lease_owner=None, lease_expires_at=None))
                await self._append_event(conn, job_id, "job_interrupted", {"interrupted_rounds": interrupted})
            return [job_id for job_id, _ in stale]
        return await self._write(work)

    async def release_job(self, job_id: str, owner: str) -> bool:
        """Hand a running job back to the queue at shutdown; its open round is recorded as interrupted."""
        async def work(conn: AsyncConnection) -> bool:
            held = (await conn.execute(select(t.jobs.c.id).where(
                t.jobs.c.id == job_id, t.jobs.c.lease_owner == owner,
                t.jobs.c.state == JobState.RUNNING.value))).first()
            if held is None:
                return False
            interrupted = await self._interrupt_open_rounds(conn, job_id)
            await conn.execute(update(t.jobs).where(t.jobs.c.id == job_id).values(
                state=JobState.QUEUED.value, lease_owner=None, lease_expires_at=None))
            await self._append_event(conn, job_id, "job_interrupted", {"interrupted_rounds": interrupted})
            return True
        return await self._write(work)

    async def queue_position(self, job: JobRecord) -> int | None:
        """1-based place among queued jobs waiting for the same runner resource; None when not queued."""
        if job.state != JobState.QUEUED:
            return None
        same = t.jobs.c.resource.is_(None) if job.resource is None else t.jobs.c.resource == job.resource
        ahead = select(func.count()).select_from(t.jobs).where(
            t.jobs.c.state == JobState.QUEUED.value, same,
            or_(t.jobs.c.created_at < job.created_at,
                and_(t.jobs.c.created_at == job.created_at, t.jobs.c.id < job.id)))

        async def work(conn: AsyncConnection) -> int:
            return int((await conn.execute(ahead)).scalar_one()) + 1
        return await self._read(work)

    async def count_jobs_by_state(self) -> dict[JobState, int]:
        """How many jobs are in each state (every state present, zero when empty)."""
        async def work(conn: AsyncConnection) -> dict[JobState, int]:
            rows = (await conn.execute(select(t.jobs.c.state, func.count()).group_by(t.jobs.c.state))).all()
            counts = {state: 0 for state in JobState}
            counts.update({JobState(state): int(n) for state, n in rows})
            return counts
        return await self._read(work)

    async def _job(self, conn: AsyncConnection, job_id: str) -> JobRecord:
        return job_from_row((await conn.execute(select(t.jobs).where(t.jobs.c.id == job_id))).one())


def _queue_position_column() -> Any:
    """A job's 1-based place among queued jobs waiting for the same resource (NULL unless queued), as a column."""
    ahead = t.jobs.alias("ahead")
    count = select(func.count()).select_from(ahead).where(
        ahead.c.state == JobState.QUEUED.value, ahead.c.resource.is_not_distinct_from(t.jobs.c.resource),
        or_(ahead.c.created_at < t.jobs.c.created_at,
            and_(ahead.c.created_at == t.jobs.c.created_at, ahead.c.id <= t.jobs.c.id))).scalar_subquery()
    return case((t.jobs.c.state == JobState.QUEUED.value, count), else_=None).label("queue_position")


__all__ = ["IdempotencyConflictError", "JobQueries"]
