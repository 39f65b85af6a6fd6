"""Engines and transactions: the only place that knows SQLite from PostgreSQL.

SQLite (the default) runs in WAL mode so readers never block the writer, with a busy timeout, and every
write transaction starts with `BEGIN IMMEDIATE`: the write lock is taken up front, so two writers queue
on the busy timeout instead of failing mid-transaction with "database is locked". Writes inside one
process are also serialised on an asyncio lock, and a lock error that still escapes is retried; it never
reaches a client. PostgreSQL needs none of this; it claims work with `FOR UPDATE SKIP LOCKED`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import event, select, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

T = TypeVar("T")
Work = Callable[[AsyncConnection], Awaitable[T]]

DEFAULT_DB_URL = "sqlite+aiosqlite:///sglang-tuner.db"
SQLITE_BUSY_TIMEOUT_MS = 30_000
_WRITE_OPTION = "sglang_tuner_write"
_LOCK_RETRIES = 8


def normalize_db_url(raw: str) -> str:
    """Accept a SQLAlchemy URL, a `postgresql://` URL, or a plain SQLite file path."""
    if "://" not in raw:
        return f"sqlite+aiosqlite:///{Path(raw).expanduser()}"
    url = make_url(raw)
    if url.get_backend_name() == "postgresql" and url.get_driver_name() != "asyncpg":
        return url.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)
    if url.get_backend_name() == "sqlite" and url.get_driver_name() != "aiosqlite":
        return url.set(drivername="sqlite+aiosqlite").render_as_string(hide_password=False)
    return raw


class StoreCore:
    """Holds the engine and runs read and write units of work; subclasses set the dialect's rules."""

    dialect: str = ""

    def __init__(self, url: str, *, clock: Callable[[], float] = time.time) -> None:
        self.url = normalize_db_url(url)
        self.clock = clock
        self.engine: AsyncEngine = self._create_engine()
        self._writer = self.engine.execution_options(**{_WRITE_OPTION: True})

    def _create_engine(self) -> AsyncEngine:
        return create_async_engine(self.url, pool_pre_ping=True)

    async def close(self) -> None:
        """Release every pooled connection."""
        await self.engine.dispose()

    async def ping(self) -> bool:
        """Whether the database answers a trivial query."""
        try:
            async with self.engine.connect() as conn:
                await conn.execute(select(1))
            return True
        except Exception:  # noqa: BLE001 - readiness reports any failure as "not ready"
            return False

    async def _read(self, work: Work[T]) -> T:
        async with self.engine.connect() as conn:
            return await work(conn)

    async def _write(self, work: Work[T]) -> T:
        """Run `work` in one write transaction: all of it commits, or none of it does."""
        async with self._writer.begin() as conn:
            return await work(conn)

    # Declared here, implemented by the query mixins, so one transaction can span several of them.
    async def _append_event(self, conn: AsyncConnection, job_id: str, kind: str, body: dict[str, Any]) -> int:
        raise NotImplementedError

    async def _interrupt_open_rounds(self, conn: AsyncConnection, job_id: str) -> list[int]:
        raise NotImplementedError

    async def _create_job(self, conn: AsyncConnection, new: Any) -> tuple[Any, bool]:
        raise NotImplementedError


class SqliteStoreCore(StoreCore):
    """SQLite: WAL, busy timeout, `BEGIN IMMEDIATE` writes serialised in-process and retried on lock."""

    dialect = "sqlite"

    def __init__(self, url: str, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__(url, clock=clock)
        self._write_lock = asyncio.Lock()

    def _create_engine(self) -> AsyncEngine:
        path = make_url(self.url).database
        if path and path != ":memory:":
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(self.url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        event.listen(engine.sync_engine, "connect", _sqlite_on_connect)
        event.listen(engine.sync_engine, "begin", _sqlite_on_begin)
        return engine

    async def _write(self, work: Work[T]) -> T:
        delay = 0.05
        for attempt in range(_LOCK_RETRIES):
            try:
                async with self._write_lock:
                    return await super()._write(work)
            except OperationalError as exc:
                if not _is_lock_error(exc) or attempt == _LOCK_RETRIES - 1:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")  # pragma: no cover


class PostgresStoreCore(StoreCore):
    """PostgreSQL through asyncpg; work is claimed with `SKIP LOCKED` (see the jobs queries)."""

    dialect = "postgresql"

    def _create_engine(self) -> AsyncEngine:
        return create_async_engine(self.url, pool_pre_ping=True, pool_size=10, max_overflow=20)


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # The driver's own implicit BEGIN is switched off so `_sqlite_on_begin` decides the lock mode.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_on_begin(conn: Connection) -> None:
    write = conn.get_execution_options().get(_WRITE_OPTION, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _is_lock_error(exc: OperationalError) -> bool:
    message = str(exc.orig).lower() if exc.orig is not None else str(exc).lower()
    return "locked" in message or "busy" in message


async def advisory_migration_lock(conn: AsyncConnection) -> None:
    """Serialise concurrent migrations of several instances starting on one PostgreSQL database."""
    await conn.execute(text("SELECT pg_advisory_xact_lock(727274)"))
