"""The service's database from the command line: `--db`, and the stored calibrations `--calibrated` applies."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import click

from service.domain import Calibration
from service.store import DEFAULT_DB_URL, Store, open_store

T = TypeVar("T")
DB_ENV = "SGLANG_TUNER_DB"


def db_option(function: click.decorators.FC) -> click.decorators.FC:
    """`--db URL`, shared by the commands that open the service's database."""
    return click.option(
        "--db", "db_url", envvar=DB_ENV, default=DEFAULT_DB_URL, show_default=True,
        help=f"Database: a SQLite file path or URL, or postgresql://user@host/db (env {DB_ENV}).")(function)


def with_store(db_url: str, work: Callable[[Store], Awaitable[T]]) -> T:
    """Run `work` on the service's database (migrated first), from a command outside the service."""
    async def run() -> T:
        store = open_store(db_url)
        try:
            await store.migrate()
            return await work(store)
        finally:
            await store.close()
    return asyncio.run(run())


def calibrated_option(function: click.decorators.FC) -> click.decorators.FC:
    """`--calibrated`: simulated rounds apply the calibrations stored in `--db`, as the service's jobs do."""
    return click.option(
        "--calibrated", is_flag=True,
        help="Simulated rounds apply the calibrations stored in --db (`sglang-tuner calibrations list`), "
             "as the service's jobs do.")(function)


def stored_calibrations(db_url: str, calibrated: bool) -> list[Calibration]:
    """The calibrations stored in `db_url` when `calibrated`, else none."""
    return with_store(db_url, lambda store: store.list_calibrations()) if calibrated else []
