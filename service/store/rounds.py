"""Round and event queries: every round is committed with its events before the engine moves on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from service.domain import JobState, Round, RoundState
from service.store import tables as t
from service.store.codec import dumps, event_from_row
from service.store.core import StoreCore
from service.store.records import EventRecord, FinishedRoundError, LeaseLostError


class RoundQueries(StoreCore):
    """Rounds (immutable once finished) and the progress events that follow them."""

    async def record_round(self, job_id: str, owner: str, round_: Round) -> None:
        """Commit a round as it starts or finishes, with its events (round_started, round_finished, decision).

        Raises:
            LeaseLostError: `owner` no longer holds the job.
            FinishedRoundError: the round with this index already finished; a retry is a new round.
        """
        async def work(conn: AsyncConnection) -> None:
            job = (await conn.execute(select(t.jobs.c.lease_owner, t.jobs.c.state, t.jobs.c.attempt)
                                      .where(t.jobs.c.id == job_id))).first()
            if job is None or job.lease_owner != owner or job.state != JobState.RUNNING.value:
                raise LeaseLostError(f"job {job_id} is no longer leased to {owner}")
            existing = (await conn.execute(select(t.rounds.c.state).where(
                t.rounds.c.job_id == job_id, t.rounds.c.idx == round_.index))).scalar_one_or_none()
            if existing is not None and RoundState(existing).is_terminal():
                raise FinishedRoundError(f"round {round_.index} of job {job_id} is {existing} and never changes")
            values = {"technique": round_.technique, "state": round_.state.value, "body": dumps(round_),
                      "attempt": job.attempt, "updated_at": self.clock()}
            if existing is None:
                await conn.execute(insert(t.rounds).values(job_id=job_id, idx=round_.index, **values))
            else:
                await conn.execute(update(t.rounds).where(
                    t.rounds.c.job_id == job_id, t.rounds.c.idx == round_.index).values(**values))
            for kind, body in _round_events(round_, started=existing is None):
                await self._append_event(conn, job_id, kind, body)
        await self._write(work)

    async def record_event(self, job_id: str, owner: str, kind: str, body: dict[str, Any]) -> int:
        """Append a job event (a step skipped, the job started) while `owner` holds the job; returns its id.

        Raises:
            LeaseLostError: `owner` no longer holds the job.
        """
        async def work(conn: AsyncConnection) -> int:
            job = (await conn.execute(select(t.jobs.c.lease_owner, t.jobs.c.state)
                                      .where(t.jobs.c.id == job_id))).first()
            if job is None or job.lease_owner != owner or job.state != JobState.RUNNING.value:
                raise LeaseLostError(f"job {job_id} is no longer leased to {owner}")
            return await self._append_event(conn, job_id, kind, body)
        return await self._write(work)

    async def list_rounds(self, job_id: str) -> list[Round]:
        """A job's rounds in order, interrupted ones included."""
        async def work(conn: AsyncConnection) -> list[Round]:
            rows = (await conn.execute(select(t.rounds.c.body).where(t.rounds.c.job_id == job_id)
                                       .order_by(t.rounds.c.idx))).scalars().all()
            return [msgspec.json.decode(body, type=Round) for body in rows]
        return await self._read(work)

    async def events_after(self, job_id: str, after_id: int = 0, limit: int = 200) -> list[EventRecord]:
        """A job's events with id above `after_id`, oldest first."""
        async def work(conn: AsyncConnection) -> list[EventRecord]:
            rows = (await conn.execute(select(t.events).where(t.events.c.job_id == job_id, t.events.c.id > after_id)
                                       .order_by(t.events.c.id).limit(limit))).all()
            return [event_from_row(row) for row in rows]
        return await self._read(work)

    async def events_of_kind(self, job_id: str, kind: str) -> list[EventRecord]:
        """Every event of one kind a job recorded, oldest first (a resumed job reads its skipped steps)."""
        async def work(conn: AsyncConnection) -> list[EventRecord]:
            rows = (await conn.execute(select(t.events).where(t.events.c.job_id == job_id, t.events.c.kind == kind)
                                       .order_by(t.events.c.id))).all()
            return [event_from_row(row) for row in rows]
        return await self._read(work)

    async def _append_event(self, conn: AsyncConnection, job_id: str, kind: str, body: dict[str, Any]) -> int:
        result = await conn.execute(insert(t.events).values(
            job_id=job_id, kind=kind, body=dumps(body), created_at=self.clock()).returning(t.events.c.id))
        return int(result.scalar_one())

    async def _interrupt_open_rounds(self, conn: AsyncConnection, job_id: str) -> list[int]:
        rows = (await conn.execute(select(t.rounds.c.idx, t.rounds.c.body).where(
            t.rounds.c.job_id == job_id,
            t.rounds.c.state.in_([RoundState.PENDING.value, RoundState.RUNNING.value])))).all()
        now = datetime.fromtimestamp(self.clock(), UTC)
        for idx, body in rows:
            stopped = msgspec.structs.replace(msgspec.json.decode(body, type=Round),
                                              state=RoundState.INTERRUPTED, finished_at=now)
            await conn.execute(update(t.rounds).where(t.rounds.c.job_id == job_id, t.rounds.c.idx == idx).values(
                state=RoundState.INTERRUPTED.value, body=dumps(stopped), updated_at=self.clock()))
            await self._append_event(conn, job_id, "round_finished", _round_summary(stopped))
        return [idx for idx, _ in rows]


def _round_summary(round_: Round) -> dict[str, Any]:
    summary: dict[str, Any] = {"round": round_.index, "technique": round_.technique, "state": round_.state.value}
    if round_.retry_of is not None:
        summary["retry_of"] = round_.retry_of
    if round_.line is not None:
        summary["line"] = round_.line
    return summary


def _round_events(round_: Round, *, started: bool) -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    if started:
        found.append(("round_started", _round_summary(round_)))
    if round_.state is RoundState.MEASURED:
        found.append(("round_measured", {**_round_summary(round_), "repeats": len(round_.results)}))
    if round_.state.is_terminal():
        found.append(("round_finished", _round_summary(round_)))
        if round_.decision is not None:
            decision = round_.decision
            found.append(("decision", {**_round_summary(round_), "verdict": decision.verdict.value,
                                       "pattern": decision.pattern.value, "reasons": decision.reasons}))
    return found
