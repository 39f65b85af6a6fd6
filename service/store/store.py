"""The store: one contract (the query mixins, written once) over SQLite or PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection

from service.store.calibrations import CalibrationQueries
from service.store.core import PostgresStoreCore, SqliteStoreCore, StoreCore, advisory_migration_lock, normalize_db_url
from service.store.jobs import JobQueries
from service.store.keys import KeyQueries
from service.store.migrate import is_at_head, upgrade_to_head
from service.store.rounds import RoundQueries
from service.store.schedules import ScheduleQueries


class Store(JobQueries, RoundQueries, KeyQueries, ScheduleQueries, CalibrationQueries, StoreCore):
    """Everything the service persists. Use `open_store(url)`; the dialect subclasses differ only in
    how they open connections and transactions (see `service.store.core`)."""

    async def migrate(self) -> None:
        """Bring the schema to the newest migration; safe when several instances start at once."""
        async def work(conn: AsyncConnection) -> None:
            if self.dialect == "postgresql":
                await advisory_migration_lock(conn)
            await conn.run_sync(upgrade_to_head)
        await self._write(work)

    async def schema_is_current(self) -> bool:
        """Whether migrations are applied (readiness)."""
        async def work(conn: AsyncConnection) -> bool:
            return await conn.run_sync(is_at_head)
        try:
            return await self._read(work)
        except Exception:  # noqa: BLE001 - readiness reports any failure as "not ready"
            return False


class SqliteStore(Store, SqliteStoreCore):
    """The default: a SQLite file in WAL mode."""


class PostgresStore(Store, PostgresStoreCore):
    """PostgreSQL through asyncpg."""


def open_store(url: str, *, clock: Callable[[], float] = time.time) -> Store:
    """A store for a database URL (or a SQLite file path). Call `await store.migrate()` before use."""
    normalized = normalize_db_url(url)
    backend = make_url(normalized).get_backend_name()
    if backend == "sqlite":
        return SqliteStore(normalized, clock=clock)
    if backend == "postgresql":
        return PostgresStore(normalized, clock=clock)
    raise ValueError(f"unsupported database {backend!r}: use a SQLite path or a postgresql:// URL")
