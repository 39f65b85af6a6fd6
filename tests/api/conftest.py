"""Fixtures for the HTTP API tests: plugins, a database with one key per scope, the app under a test client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from litestar.testing import TestClient

from service.api.app import create_app
from service.api.runtime import ServiceSettings
from service.plugin_host import PluginHost
from service.store import Scope, Store, open_store
from service.workers.pool import WorkerSettings
from tests.api.fakes import FakeExecutor, FakePlugin


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    """A migrated SQLite store in the test's own directory."""
    db = open_store(str(tmp_path / "tuner.db"))
    await db.migrate()
    yield db
    await db.close()


@pytest.fixture
def plugins() -> PluginHost:
    return PluginHost(plugins=[("fake", FakePlugin())], load_entry_points=False)


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "tuner.db")


@pytest.fixture
def tokens(db_path: str) -> dict[str, str]:
    """One token per scope, created before the app starts."""
    async def make() -> dict[str, str]:
        store = open_store(db_path)
        await store.migrate()
        made = {scope.value: (await store.create_api_key(f"{scope.value}-key", [scope]))[1] for scope in Scope}
        await store.close()
        return made
    return asyncio.run(make())


@pytest.fixture
def settings(db_path: str) -> ServiceSettings:
    return ServiceSettings(db_url=db_path, sse_poll_seconds=0.05, key_cache_seconds=0.0, max_body_bytes=64 * 1024,
                           workers=WorkerSettings(slots=4, lease_seconds=2.0, heartbeat_seconds=0.1,
                                                  poll_seconds=0.05))


@pytest.fixture
def executor() -> FakeExecutor:
    return FakeExecutor()


@pytest.fixture
def client(settings: ServiceSettings, plugins: PluginHost, executor: FakeExecutor,
           tokens: dict[str, str]) -> Iterator[TestClient]:
    app = create_app(settings, plugins=plugins, executor=executor)
    with TestClient(app) as test_client:
        yield test_client
