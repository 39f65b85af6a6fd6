"""No input makes the service answer 500: generated requests to every route, on SQLite and on PostgreSQL.

At least 5,000 generated requests per database (`SGLANG_TUNER_WILD_EXAMPLES` sets another number), each
through the real app in-process (litestar's test client, the app's lifespan, workers and scheduler
running). Every answer must be below 500, every error a problem+json, and no answer may show where the
server keeps its files. PostgreSQL runs when SGLANG_TUNER_TEST_PG_URL is set (`scripts/ci_postgres.sh`), in
a database of its own that is dropped afterwards.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from litestar.testing import TestClient
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import create_async_engine

from service.api.app import create_app
from service.api.runtime import ServiceSettings
from service.plugin_host import PluginHost
from service.store import Scope, normalize_db_url, open_store
from service.workers.pool import WorkerSettings
from tests.api.fakes import FakeExecutor, FakePlugin
from tests.api.wild_requests import ROUTES, WildRequest, wild_requests

EXAMPLES = int(os.environ.get("SGLANG_TUNER_WILD_EXAMPLES", "5000"))
PG_URL = os.environ.get("SGLANG_TUNER_TEST_PG_URL")
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.skipif(
    not PG_URL, reason="set SGLANG_TUNER_TEST_PG_URL (scripts/ci_postgres.sh prints one)"))]
PROJECT_ROOT = str(Path(__file__).parents[2])


async def _admin(url: str, statement: str) -> None:
    engine = create_async_engine(normalize_db_url(url), isolation_level="AUTOCOMMIT")
    async with engine.connect() as conn:
        await conn.execute(text(statement))
    await engine.dispose()


@pytest.fixture(params=BACKENDS)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database: a SQLite file, or a PostgreSQL database created for this test and dropped after."""
    if request.param == "sqlite":
        yield str(tmp_path / "tuner.db")
        return
    base = make_url(normalize_db_url(PG_URL or ""))
    name = f"wild_{secrets.token_hex(4)}"
    asyncio.run(_admin(PG_URL or "", f"CREATE DATABASE {name}"))
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_admin(PG_URL or "", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


def _admin_token(db_url: str) -> str:
    async def make() -> str:
        store = open_store(db_url)
        await store.migrate()
        _, token = await store.create_api_key("wild", [Scope.ADMIN])
        await store.close()
        return token
    return asyncio.run(make())


def _app_client(db_url: str) -> TestClient[Any]:
    settings_ = ServiceSettings(db_url=db_url, sse_poll_seconds=0.02, key_cache_seconds=5.0,
                                workers=WorkerSettings(slots=4, lease_seconds=5.0, heartbeat_seconds=0.5,
                                                       poll_seconds=0.05))
    app = create_app(settings_, plugins=PluginHost(plugins=[("fake", FakePlugin())], load_entry_points=False),
                     executor=FakeExecutor(rounds=1, round_seconds=0.0))
    return TestClient(app, base_url="http://127.0.0.1:8000", raise_server_exceptions=False, timeout=30)


def _known_ids(client: TestClient[Any]) -> tuple[list[str], list[str]]:
    """A finished job (first), a queued one, and a schedule: ids that lead generated requests past the 404."""
    finished = client.post("/v1/jobs", json={"playbook": "coding-assistant", "kind": "round"}).json()["id"]
    deadline = time.monotonic() + 30
    while client.get(f"/v1/jobs/{finished}").json()["state"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, "the seed job did not finish"
        time.sleep(0.05)
    queued = client.post("/v1/jobs", json={"playbook": "coding-assistant", "runner": "gpu-host"}).json()["id"]
    schedule = client.post("/v1/schedules", json={"name": "seed", "cron": "0 3 * * *",
                                                  "job": {"playbook": "coding-assistant"}}).json()["id"]
    return [finished, queued], [schedule]


def _send(client: TestClient[Any], request: WildRequest) -> Any:
    url = request.path + (f"?{request.query}" if request.query else "")
    headers = {name: value.encode("latin-1") for name, value in request.headers.items()}  # as sent on the wire
    if request.files is not None:
        return client.request(request.method, url, headers=headers, files=request.files)
    return client.request(request.method, url, headers=headers, content=request.body)


def _check_answer(request: WildRequest, status: int, content_type: str, body: str, private: list[str]) -> None:
    assert status < 500, f"{status} for {request!r}: {body[:600]}"
    if status >= 400:
        assert content_type.startswith("application/problem+json"), f"{status} {content_type} for {request!r}"
    for place in private:
        assert place not in body, f"the answer to {request!r} shows the server path {place}"


def test_every_route_is_exercised(tmp_path: Path) -> None:
    with _app_client(str(tmp_path / "tuner.db")) as client:
        app_routes = {route.path: sorted(set(getattr(route, "methods", ())) - {"OPTIONS", "HEAD"})
                      for route in client.app.routes}
    served = {path: methods for path, methods in app_routes.items() if methods and not path.startswith("/schema")}
    assert served == {path: sorted(methods) for path, methods in ROUTES.items() if not path.startswith("/schema")}


@pytest.mark.parametrize("examples", [EXAMPLES])
def test_no_generated_request_gets_a_server_error(database: str, tmp_path: Path, examples: int) -> None:
    token = _admin_token(database)
    private = [PROJECT_ROOT, str(tmp_path)]
    seen: dict[str, int] = {}
    with _app_client(database) as client:
        client.headers["authorization"] = f"Bearer {token}"
        job_ids, schedule_ids = _known_ids(client)

        @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(request=wild_requests(job_ids, schedule_ids))
        def answer_below_500(request: WildRequest) -> None:
            response = _send(client, request)
            _check_answer(request, response.status_code, response.headers.get("content-type", ""), response.text,
                          private)
            seen[f"{response.status_code // 100}xx"] = seen.get(f"{response.status_code // 100}xx", 0) + 1

        answer_below_500()
    assert sum(seen.values()) >= examples
    # The generator reaches handlers, not only the checks in front of them.
    assert seen.get("2xx", 0) > examples // 20, seen
