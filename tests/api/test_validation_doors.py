"""Bad scenarios at the service's doors: POST /v1/jobs, schedules (created and fired) and the MCP tools.

Each is refused with a 422 problem naming the field (an MCP tool error naming the argument), and no job is
stored or started: the executor, which would run the rounds, never sees one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar.testing import TestClient

from service import Playbook, hookimpl
from service.api.app import create_app
from service.api.runtime import ServiceSettings
from service.plugin_host import PluginHost
from service.scheduler import ScheduleRunner
from service.store import NewSchedule, open_store
from tests.api.fakes import FakeExecutor, FakePlugin, auth
from tests.e2e.bad_inputs import BAD_INPUTS, BASE, JSON_INPUTS, BadInput

JOB = {"playbook": "coding-assistant", "runner": "simulator"}
IDS = [bad.name for bad in BAD_INPUTS]
JSON_IDS = [bad.name for bad in JSON_INPUTS]
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def mounted(settings: ServiceSettings, plugins: PluginHost, executor: FakeExecutor,
            tokens: dict[str, str]) -> Iterator[TestClient]:
    """The service with its MCP endpoint at /mcp, whose job tools call this app's /v1/jobs in-process."""
    public = dataclasses.replace(settings, public_url="http://testserver.local")
    with TestClient(create_app(public, plugins=plugins, executor=executor)) as test_client:
        yield test_client


def _no_job(client: TestClient, tokens: dict[str, str], executor: FakeExecutor) -> None:
    assert client.get("/v1/jobs", headers=auth(tokens["read"])).json()["items"] == []
    assert executor.started == []


def test_the_unedited_scenario_is_accepted(client: TestClient, tokens: dict[str, str]) -> None:
    good = BadInput("unedited", (), "", "").data()
    assert client.post("/v1/jobs", json={**JOB, "scenario": good}, headers=auth(tokens["write"])).status_code == 202


@pytest.mark.parametrize("kind", ["tune", "round"])
@pytest.mark.parametrize("bad", JSON_INPUTS, ids=JSON_IDS)
def test_post_jobs_refuses_it_with_422_naming_the_field(bad: BadInput, kind: str, client: TestClient,
                                                        tokens: dict[str, str], executor: FakeExecutor) -> None:
    response = client.post("/v1/jobs", json={**JOB, "kind": kind, "scenario": bad.data()},
                           headers=auth(tokens["write"]))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["type"].endswith("/invalid-job")
    assert problem["field"] == f"scenario.{bad.field}"
    assert bad.words in f"{problem['detail']}; {problem['hint']}"
    _no_job(client, tokens, executor)


@pytest.mark.parametrize("bad", JSON_INPUTS, ids=JSON_IDS)
def test_creating_a_schedule_refuses_it(bad: BadInput, client: TestClient, tokens: dict[str, str]) -> None:
    body = {"name": f"nightly-{bad.name}", "cron": "0 3 * * *", "job": {**JOB, "scenario": bad.data()}}
    response = client.post("/v1/schedules", json=body, headers=auth(tokens["admin"]))
    assert response.status_code == 422, response.text
    assert response.json()["field"] == f"job.scenario.{bad.field}"
    assert client.get("/v1/schedules", headers=auth(tokens["read"])).json() == []


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["negative-bench-concurrency", "shell-in-model", "tp16-on-one-8-gpu-node"])
async def test_a_stored_schedule_with_a_bad_scenario_fires_no_job(name: str, tmp_path: Path,
                                                                  plugins: PluginHost) -> None:
    # A schedule stored before its scenario was refused at the door (an older version, a direct insert).
    bad = next(b for b in BAD_INPUTS if b.name == name)
    store = open_store(str(tmp_path / "fires.db"))
    await store.migrate()
    try:
        schedule = await store.create_schedule(NewSchedule(name="old", cron="* * * * *",
                                                           job_request={**JOB, "scenario": bad.data()}))
        assert await ScheduleRunner(store, plugins, owner="one").fire(schedule, 1_800_000_000.0) is None
        assert (await store.list_jobs(schedule_id=schedule.id)).items == []
        assert await store.list_fires(schedule.id) == []
    finally:
        await store.close()


def _call(client: TestClient, token: str, tool: str, arguments: dict) -> dict:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    response = client.post("/mcp", json=body, headers=MCP_HEADERS | auth(token))
    assert response.status_code == 200, response.text
    return response.json()["result"]


@pytest.mark.parametrize("bad", JSON_INPUTS, ids=JSON_IDS)
def test_the_mcp_start_tool_refuses_it_naming_the_argument(bad: BadInput, mounted: TestClient,
                                                           tokens: dict[str, str], executor: FakeExecutor) -> None:
    result = _call(mounted, tokens["write"], "start_tuning_job", {**JOB, "scenario": bad.data()})
    assert result.get("isError") is True, result
    text = result["content"][0]["text"]
    assert text.startswith(f"invalid argument `scenario.{bad.field}`: ") and bad.words in text, text
    _no_job(mounted, tokens, executor)


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=IDS)
def test_the_mcp_validate_tool_reports_it(bad: BadInput, mounted: TestClient,
                                          tokens: dict[str, str]) -> None:
    result = _call(mounted, tokens["read"], "validate_config", {"scenario_toml": bad.toml()})
    data = result["structuredContent"]["data"]
    assert data["valid"] is False
    assert bad.field in [issue["field"] for issue in data["issues"] if issue["severity"] == "error"]
    good = _call(mounted, tokens["read"], "validate_config", {"scenario_path": str(BASE)})
    assert good["structuredContent"]["data"]["valid"] is True


class DefaultScenarioPlugin:
    """A playbook whose own scenario file fails the check (as a third-party playbook's might)."""

    def __init__(self, scenario: Path) -> None:
        self.scenario = scenario

    @hookimpl
    def register_playbooks(self, register):
        register(Playbook(name="bad-default", techniques=["chunked_prefill"], runner="simulator",
                          scenario=str(self.scenario)))


def test_a_job_without_a_scenario_checks_its_playbooks_own(settings: ServiceSettings, executor: FakeExecutor,
                                                            tokens: dict[str, str], tmp_path: Path) -> None:
    bad = next(b for b in BAD_INPUTS if b.name == "tp16-on-one-8-gpu-node")
    path = tmp_path / "default.toml"
    path.write_text(bad.toml(), encoding="utf-8")
    plugins = PluginHost(plugins=[("fake", FakePlugin()), ("bad", DefaultScenarioPlugin(path))],
                         load_entry_points=False)
    with TestClient(create_app(settings, plugins=plugins, executor=executor)) as client:
        response = client.post("/v1/jobs", json={"playbook": "bad-default"}, headers=auth(tokens["write"]))
        assert response.status_code == 422, response.text
        problem = response.json()
        assert problem["field"] == "playbook" and bad.field in problem["detail"]
        _no_job(client, tokens, executor)
