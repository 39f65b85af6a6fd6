"""No cross-site writes, in `--dev` too: a loopback server, requests as a browser on another site sends them."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from service.api.app import create_app
from service.api.runtime import ServiceSettings
from service.plugin_host import PluginHost
from service.workers.pool import WorkerSettings
from tests.api.fakes import FakeExecutor, FakePlugin
from tests.api.service_process import free_port, wait_ready

JOB = b'{"playbook": "coding-assistant"}'


@pytest.fixture(scope="module")
def dev_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app in --dev on 127.0.0.1 (real uvicorn): loopback requests need no key."""
    db = str(tmp_path_factory.mktemp("cross-site") / "tuner.db")
    settings = ServiceSettings(db_url=db, dev=True, workers=WorkerSettings(poll_seconds=0.05))
    app = create_app(settings, plugins=PluginHost(plugins=[("fake", FakePlugin())], load_entry_points=False),
                     executor=FakeExecutor(rounds=1, round_seconds=0.01))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    assert wait_ready(url, 20)
    yield url
    server.should_exit = True
    thread.join(timeout=10)


def test_a_cross_origin_text_plain_post_is_refused(dev_service: str) -> None:
    before = len(httpx.get(f"{dev_service}/v1/jobs").json()["items"])
    # What a page on another site sends with fetch(..., {method: "POST", mode: "no-cors", body: "..."}).
    answer = httpx.post(f"{dev_service}/v1/jobs", content=JOB,
                        headers={"Content-Type": "text/plain;charset=UTF-8", "Origin": "https://attacker.example"})
    assert answer.status_code == 403 and answer.json()["field"] == "Origin"
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert len(httpx.get(f"{dev_service}/v1/jobs").json()["items"]) == before


def test_a_text_plain_post_is_unsupported_whatever_its_origin(dev_service: str) -> None:
    for headers in ({"Content-Type": "text/plain"}, {"Content-Type": "application/x-www-form-urlencoded"}, {}):
        answer = httpx.post(f"{dev_service}/v1/jobs", content=JOB, headers=headers)
        assert answer.status_code == 415 and answer.json()["field"] == "Content-Type", headers


def test_json_from_another_origin_is_refused_and_from_loopback_accepted(dev_service: str) -> None:
    json_type = {"Content-Type": "application/json"}
    refused = httpx.post(f"{dev_service}/v1/jobs", content=JOB, headers={**json_type, "Origin": "http://evil.test"})
    assert refused.status_code == 403
    cancel = httpx.post(f"{dev_service}/v1/jobs/job_x/cancel", headers={"Origin": "null"})
    assert cancel.status_code == 403  # a bodiless write from a sandboxed page
    own_page = httpx.post(f"{dev_service}/v1/jobs", content=JOB,
                          headers={**json_type, "Origin": dev_service.replace("127.0.0.1", "localhost")})
    assert own_page.status_code == 202
    program = httpx.post(f"{dev_service}/v1/jobs", content=JOB, headers=json_type)
    assert program.status_code == 202


def test_a_rebound_host_is_refused_in_dev(dev_service: str) -> None:
    # A page on attacker.example whose DNS now answers 127.0.0.1: same-origin for the browser, reads included.
    answer = httpx.get(f"{dev_service}/v1/jobs", headers={"Host": "attacker.example:8000"})
    assert answer.status_code == 421 and answer.json()["field"] == "Host"
    assert httpx.get(f"{dev_service}/v1/jobs", headers={"Host": "localhost"}).status_code == 200


def test_a_profile_upload_must_be_multipart(dev_service: str) -> None:
    answer = httpx.post(f"{dev_service}/v1/profiles", content=b"{}", headers={"Content-Type": "application/json"})
    assert answer.status_code == 415 and "multipart/form-data" in answer.json()["detail"]
