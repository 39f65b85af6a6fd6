"""What the store hands back: typed records, decoded from rows (never raw rows)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import msgspec

from service.domain import JobState


class StoreError(Exception):
    """Base of the store's own errors."""


class LeaseLostError(StoreError):
    """The caller no longer holds the job's lease (it expired and was reaped, or the job was cancelled)."""


class FinishedRoundError(StoreError):
    """A finished round never changes: a retry is a new round."""


class NewJob(msgspec.Struct, kw_only=True):
    """A job to enqueue: what was asked for, and who asked."""

    playbook: str
    runner: str
    request: dict[str, Any]
    kind: str = "tune"
    resource: str | None = None
    idempotency_key: str | None = None
    schedule_id: str | None = None
    created_by: str | None = None


class JobRecord(msgspec.Struct, kw_only=True):
    """A stored job with its execution bookkeeping (lease, attempt, cancel flag)."""

    id: str
    kind: str
    playbook: str
    runner: str
    resource: str | None
    state: JobState
    request: dict[str, Any]
    idempotency_key: str | None
    schedule_id: str | None
    created_by: str | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    stop_reason: str | None
    report: Any
    cancel_requested: bool
    attempt: int
    lease_owner: str | None
    lease_expires_at: float | None


class JobPage(msgspec.Struct, kw_only=True):
    """One page of jobs, newest first; `next_cursor` is None on the last page.

    `queue_positions` holds the 1-based place of each queued job of the page among the queued jobs waiting
    for the same runner resource (as `queue_position` answers), read in the same query as the page.
    """

    items: list[JobRecord]
    next_cursor: str | None
    queue_positions: dict[str, int] = msgspec.field(default_factory=dict)


class EventRecord(msgspec.Struct, kw_only=True):
    """A job progress event; ids grow monotonically, so a client resumes after the last id it saw."""

    id: int
    job_id: str
    kind: str
    body: dict[str, Any]
    created_at: float


class Scope(StrEnum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"

    def grants(self, needed: Scope) -> bool:
        """`admin` implies `write`, which implies `read`."""
        order = (Scope.READ, Scope.WRITE, Scope.ADMIN)
        return order.index(self) >= order.index(needed)


class ApiKeyRecord(msgspec.Struct, kw_only=True):
    """A stored API key: only the hash of its secret is kept."""

    id: str
    name: str
    scopes: list[Scope]
    created_at: float
    revoked_at: float | None = None
    secret_hash: str = ""

    def allows(self, needed: Scope) -> bool:
        """Whether a live key with these scopes may do what `needed` guards."""
        return self.revoked_at is None and any(scope.grants(needed) for scope in self.scopes)


class CatchUp(StrEnum):
    """What to do with fires missed while no instance was running (beyond the misfire grace)."""

    RUN_ONCE = "run_once"
    SKIP = "skip"


class NewSchedule(msgspec.Struct, kw_only=True):
    """A cron schedule that starts a tuning job for a target."""

    name: str
    cron: str
    job_request: dict[str, Any]
    timezone: str = "UTC"
    enabled: bool = True
    misfire_grace_seconds: int = 300
    catch_up: CatchUp = CatchUp.RUN_ONCE


class ScheduleRecord(msgspec.Struct, kw_only=True):
    """A stored schedule."""

    id: str
    name: str
    cron: str
    timezone: str
    job_request: dict[str, Any]
    enabled: bool
    misfire_grace_seconds: int
    catch_up: CatchUp
    created_at: float
    last_fire_at: float | None


class FireOutcome(StrEnum):
    STARTED = "started"
    COALESCED = "coalesced"
    MISSED = "missed"


class FireRecord(msgspec.Struct, kw_only=True):
    """One scheduled fire time and what became of it."""

    schedule_id: str
    fire_at: float
    outcome: FireOutcome
    job_id: str | None
    instance: str
    recorded_at: float
