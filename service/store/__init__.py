"""Persistence: jobs, rounds, events, API keys and schedules in SQLite (default) or PostgreSQL."""

from service.store.codec import BadCursorError
from service.store.core import DEFAULT_DB_URL, normalize_db_url
from service.store.jobs import IdempotencyConflictError
from service.store.records import (
    ApiKeyRecord,
    CatchUp,
    EventRecord,
    FinishedRoundError,
    FireOutcome,
    FireRecord,
    JobPage,
    JobRecord,
    LeaseLostError,
    NewJob,
    NewSchedule,
    ScheduleRecord,
    Scope,
    StoreError,
)
from service.store.schedules import DuplicateScheduleError
from service.store.store import PostgresStore, SqliteStore, Store, open_store

__all__ = [
    "DEFAULT_DB_URL",
    "ApiKeyRecord",
    "BadCursorError",
    "CatchUp",
    "DuplicateScheduleError",
    "EventRecord",
    "FinishedRoundError",
    "FireOutcome",
    "FireRecord",
    "IdempotencyConflictError",
    "JobPage",
    "JobRecord",
    "LeaseLostError",
    "NewJob",
    "NewSchedule",
    "PostgresStore",
    "ScheduleRecord",
    "Scope",
    "SqliteStore",
    "Store",
    "StoreError",
    "normalize_db_url",
    "open_store",
]
