"""Generated requests against the OpenAPI document: no 5xx, responses match the schema, with and without a key."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings

from service.api.app import create_app
from service.api.runtime import ServiceSettings
from service.plugin_host import PluginHost
from service.store import Scope, open_store
from service.workers.pool import WorkerSettings
from tests.api.fakes import FakeExecutor, FakePlugin
from tests.api.service_process import free_port, wait_ready

schemathesis = pytest.importorskip("schemathesis")  # a test dependency: pip install schemathesis
_openapi_checks = pytest.importorskip("schemathesis.specs.openapi.checks")
CHECKS = (schemathesis.checks.not_a_server_error, _openapi_checks.response_schema_conformance,
          _openapi_checks.content_type_conformance)


def _serve(tmp: Path) -> Iterator[tuple[str, str]]:
    db = str(tmp / "tuner.db")

    async def make_key() -> str:
        store = open_store(db)
        await store.migrate()
        _, token = await store.create_api_key("schemathesis", [Scope.ADMIN])
        await store.close()
        return token
    token = asyncio.run(make_key())
    settings_ = ServiceSettings(db_url=db, workers=WorkerSettings(poll_seconds=0.05))
    app = create_app(settings_, plugins=PluginHost(plugins=[("fake", FakePlugin())], load_entry_points=False),
                     executor=FakeExecutor(rounds=1, round_seconds=0.01))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, 20)
    yield url, token
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    yield from _serve(tmp_path_factory.mktemp("schemathesis"))


def _exercise(operation: Any, url: str, headers: dict[str, str]) -> tuple[int, str | None]:
    """Run generated cases for one operation; returns how many ran and the first failure, if any."""
    ran = 0

    @settings(max_examples=8, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy())
    def run(case: Any) -> None:
        nonlocal ran
        ran += 1
        case.headers = {**(case.headers or {}), **headers}
        case.call_and_validate(base_url=url, checks=CHECKS)

    try:
        run()
    except Exception as exc:  # noqa: BLE001 - reported with the operation's name by the caller
        return ran, str(exc)[:800]
    return ran, None


@pytest.mark.parametrize("with_key", [True, False], ids=["with-key", "without-key"])
def test_generated_requests_never_break_the_contract(served: tuple[str, str], with_key: bool) -> None:
    url, token = served
    schema = schemathesis.openapi.from_url(f"{url}/schema/openapi.json")
    headers = {"Authorization": f"Bearer {token}"} if with_key else {}
    failures, cases = [], 0
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path.endswith("/events") or operation.path == "/v1/profiles":
            continue  # an endless stream and multipart uploads have their own tests
        ran, failure = _exercise(operation, url, headers)
        cases += ran
        if failure is not None:
            failures.append(f"{operation.method.upper()} {operation.path}: {failure}")
    assert failures == []
    assert cases > 60
