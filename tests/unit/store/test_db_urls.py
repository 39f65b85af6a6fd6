"""Database URLs: what `--db` accepts and which store it opens."""

from __future__ import annotations

import pytest

from service.store import PostgresStore, SqliteStore, normalize_db_url, open_store


def test_plain_paths_and_sync_drivers_become_async_urls() -> None:
    assert normalize_db_url("tuner.db") == "sqlite+aiosqlite:///tuner.db"
    assert normalize_db_url("sqlite:///var/lib/t.db") == "sqlite+aiosqlite:///var/lib/t.db"
    assert normalize_db_url("postgresql://u:p@db/tuner") == "postgresql+asyncpg://u:p@db/tuner"
    assert normalize_db_url("postgresql+asyncpg://u@db/tuner") == "postgresql+asyncpg://u@db/tuner"


def test_open_store_picks_the_dialect(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert isinstance(open_store(str(tmp_path / "t.db")), SqliteStore)
    assert isinstance(open_store("postgresql://u@127.0.0.1:1/none"), PostgresStore)
    with pytest.raises(ValueError, match="unsupported database"):
        open_store("mysql+aiomysql://u@db/t")
