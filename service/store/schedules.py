"""Schedule queries. A fire is claimed by inserting its (schedule, fire time) row: the primary key is the
lease that lets exactly one of several instances sharing a database start the job for that fire."""

from __future__ import annotations

from typing import Any

import msgspec
from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from service.store import tables as t
from service.store.codec import AnyRow, dumps, loads, new_id
from service.store.core import StoreCore
from service.store.records import (
    FireOutcome,
    FireRecord,
    JobRecord,
    NewJob,
    NewSchedule,
    ScheduleRecord,
    StoreError,
)


class DuplicateScheduleError(StoreError):
    """A schedule with this name exists already."""


class ScheduleQueries(StoreCore):
    """Cron schedules stored as plain rows (never pickled callables) and the record of every fire."""

    async def create_schedule(self, new: NewSchedule) -> ScheduleRecord:
        """Store a schedule.

        Raises:
            DuplicateScheduleError: the name is taken.
        """
        schedule_id, now = new_id("sch"), self.clock()

        async def work(conn: AsyncConnection) -> ScheduleRecord:
            await conn.execute(insert(t.schedules).values(
                id=schedule_id, name=new.name, cron=new.cron, timezone=new.timezone,
                job_request=dumps(new.job_request), enabled=new.enabled,
                misfire_grace_seconds=new.misfire_grace_seconds, catch_up=new.catch_up.value, created_at=now))
            return await self._schedule(conn, schedule_id)
        try:
            return await self._write(work)
        except IntegrityError as exc:
            raise DuplicateScheduleError(f"a schedule named {new.name!r} exists already") from exc

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """One schedule, or None."""
        async def work(conn: AsyncConnection) -> ScheduleRecord | None:
            row = (await conn.execute(select(t.schedules).where(t.schedules.c.id == schedule_id))).first()
            return _schedule_from_row(row) if row is not None else None
        return await self._read(work)

    async def list_schedules(self) -> list[ScheduleRecord]:
        """Every schedule, oldest first."""
        async def work(conn: AsyncConnection) -> list[ScheduleRecord]:
            rows = (await conn.execute(select(t.schedules).order_by(t.schedules.c.created_at))).all()
            return [_schedule_from_row(row) for row in rows]
        return await self._read(work)

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Delete a schedule and its fire record; False when there was none."""
        async def work(conn: AsyncConnection) -> bool:
            await conn.execute(delete(t.schedule_fires).where(t.schedule_fires.c.schedule_id == schedule_id))
            return (await conn.execute(delete(t.schedules).where(t.schedules.c.id == schedule_id))).rowcount == 1
        return await self._write(work)

    async def record_fire(self, schedule_id: str, fire_at: float, outcome: FireOutcome, instance: str,
                          job: NewJob | None = None) -> tuple[FireRecord, JobRecord | None] | None:
        """Claim one fire and, for a started fire, enqueue its job in the same transaction.

        Returns None when another instance recorded this fire first (it started or skipped the job).
        """
        async def work(conn: AsyncConnection) -> tuple[FireRecord, JobRecord | None] | None:
            fire = FireRecord(schedule_id=schedule_id, fire_at=fire_at, outcome=outcome, job_id=None,
                              instance=instance, recorded_at=self.clock())
            try:
                async with conn.begin_nested():
                    await conn.execute(insert(t.schedule_fires).values(**_fire_values(fire)))
            except IntegrityError:
                return None
            created = None
            if outcome == FireOutcome.STARTED and job is not None:
                created, _ = await self._create_job(conn, job)
                fire.job_id = created.id
                await conn.execute(update(t.schedule_fires).where(
                    t.schedule_fires.c.schedule_id == schedule_id, t.schedule_fires.c.fire_at == fire_at,
                ).values(job_id=created.id))
            await conn.execute(update(t.schedules).where(t.schedules.c.id == schedule_id).values(
                last_fire_at=func.coalesce(func.max(t.schedules.c.last_fire_at, fire_at), fire_at)
                if self.dialect == "sqlite" else func.greatest(t.schedules.c.last_fire_at, fire_at)))
            return fire, created
        try:
            return await self._write(work)
        except IntegrityError:
            return None  # the schedule was deleted meanwhile

    async def list_fires(self, schedule_id: str, limit: int = 100) -> list[FireRecord]:
        """A schedule's most recent fires, newest first."""
        async def work(conn: AsyncConnection) -> list[FireRecord]:
            rows = (await conn.execute(select(t.schedule_fires).where(t.schedule_fires.c.schedule_id == schedule_id)
                                       .order_by(t.schedule_fires.c.fire_at.desc()).limit(limit))).all()
            return [msgspec.convert(_plain(row), FireRecord) for row in rows]
        return await self._read(work)

    async def _schedule(self, conn: AsyncConnection, schedule_id: str) -> ScheduleRecord:
        return _schedule_from_row((await conn.execute(
            select(t.schedules).where(t.schedules.c.id == schedule_id))).one())


def _fire_values(fire: FireRecord) -> dict[str, object]:
    return {"schedule_id": fire.schedule_id, "fire_at": fire.fire_at, "outcome": fire.outcome.value,
            "job_id": fire.job_id, "instance": fire.instance, "recorded_at": fire.recorded_at}


def _plain(row: AnyRow) -> dict[str, Any]:
    # Row keys are SQLAlchemy `quoted_name`s; msgspec wants exact `str` keys.
    return {str(key): value for key, value in row._mapping.items()}


def _schedule_from_row(row: AnyRow) -> ScheduleRecord:
    m = _plain(row)
    m["job_request"] = loads(m["job_request"])
    m["enabled"] = bool(m["enabled"])
    return msgspec.convert(m, ScheduleRecord)
