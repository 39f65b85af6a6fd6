"""The API for agents: 202 + Location, `next` links, long-poll, /llms.txt, /v1/tools, /v1/diagnoses, /mcp."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from litestar.testing import TestClient

from service.api.app import create_app
from service.api.runtime import ServiceSettings
from service.mcp import ServiceJobs, tool_catalogue
from service.plugin_host import PluginHost
from service.scenario import load_scenario
from tests.api.fakes import FakeExecutor, auth, wait_for_state

ROOT = Path(__file__).parents[2]
FIXTURES = ROOT / "tests" / "unit" / "diagnosis" / "fixtures"
JOB = {"playbook": "coding-assistant", "runner": "simulator"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _rels(job: dict) -> list[str]:
    return [step["rel"] for step in job["next"]]


def test_a_new_job_is_202_with_location_and_next_steps_that_follow_its_state(
        client: TestClient, tokens: dict[str, str]) -> None:
    created = client.post("/v1/jobs", json=JOB, headers=auth(tokens["write"]))
    assert created.status_code == 202
    job = created.json()
    assert created.headers["location"] == job["links"]["self"] == f"/v1/jobs/{job['id']}"
    assert _rels(job) == ["wait", "events", "rounds", "cancel"]
    cancel = next(step for step in job["next"] if step["rel"] == "cancel")
    assert cancel["method"] == "POST" and cancel["href"] == job["links"]["cancel"]
    done = wait_for_state(client, job["id"], tokens["read"], {"succeeded"})
    assert _rels(done) == ["report", "rounds"]


def test_long_poll_answers_with_the_next_state(client: TestClient, tokens: dict[str, str],
                                               executor: FakeExecutor) -> None:
    executor.round_seconds = 0.2
    job = client.post("/v1/jobs", json=JOB, headers=auth(tokens["write"])).json()
    seen = [job["state"]]
    while seen[-1] not in ("succeeded", "failed"):
        seen.append(client.get(f"/v1/jobs/{job['id']}", params={"wait": 30}, headers=auth(tokens["read"]))
                    .json()["state"])
    # Each long-poll came back with a different state than the one before it: no answer was a timeout.
    assert seen[-1] == "succeeded" and all(a != b for a, b in zip(seen, seen[1:], strict=False))
    finished = client.get(f"/v1/jobs/{job['id']}", params={"wait": 30}, headers=auth(tokens["read"]))
    assert finished.json()["state"] == "succeeded"
    too_long = client.get(f"/v1/jobs/{job['id']}", params={"wait": 61}, headers=auth(tokens["read"]))
    assert too_long.status_code == 400 and too_long.json()["field"] == "wait"


def test_cancel_answers_202_with_the_job_location(client: TestClient, tokens: dict[str, str],
                                                  executor: FakeExecutor) -> None:
    executor.round_seconds = 5.0
    job = client.post("/v1/jobs", json=JOB, headers=auth(tokens["write"])).json()
    cancelled = client.post(f"/v1/jobs/{job['id']}/cancel", headers=auth(tokens["write"]))
    assert cancelled.status_code == 202 and cancelled.headers["location"] == f"/v1/jobs/{job['id']}"


def test_llms_txt_names_only_routes_the_service_has(client: TestClient) -> None:
    text = client.get("/llms.txt")
    assert text.status_code == 200 and text.headers["content-type"].startswith("text/markdown")
    schema_paths = set(client.get("/schema/openapi.json").json()["paths"])
    templates = {re.sub(r"\{[^}]+\}", "{}", path) for path in schema_paths}
    named = set(re.findall(r"`(?:GET|POST) (/v1/[^`?\s]*)", text.text))
    assert named and {re.sub(r"\{[^}]+\}", "{}", path) for path in named} <= templates
    assert "/mcp" in text.text and "Idempotency-Key" in text.text


def test_tools_are_the_mcp_tools_as_function_schemas(client: TestClient, tokens: dict[str, str]) -> None:
    assert client.get("/v1/tools").status_code == 401
    tools = client.get("/v1/tools", headers=auth(tokens["read"])).json()
    specs = tool_catalogue(ServiceJobs(base_url=None))
    assert [t["function"]["name"] for t in tools] == [s.name for s in specs]
    by_name = {t["function"]["name"]: t for t in tools}
    assert by_name["start_tuning_job"]["x-writes"] is True and by_name["diagnose_benchmark"]["x-writes"] is False
    assert by_name["diagnose_benchmark"]["function"]["parameters"]["required"] == ["bench_output"]


def test_diagnosis_of_casebook_case1_round0_points_at_chunked_prefill(client: TestClient,
                                                                       tokens: dict[str, str]) -> None:
    body = {"bench_output": (FIXTURES / "case1_round0.txt").read_text()}
    response = client.post("/v1/diagnoses", json=body, headers=auth(tokens["read"]))
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["next_technique"] == "chunked_prefill"
    assert {"ttft_tail_blocking", "itl_stall"} <= {f["id"] for f in result["findings"]}
    assert any(item.startswith("metrics:") for item in result["missing"])


def test_diagnosis_with_metrics_and_scenario_reads_further(client: TestClient, tokens: dict[str, str]) -> None:
    scenario = load_scenario(ROOT / "playbooks" / "scenarios" / "document-qa-rag-round0.toml")
    body = {"bench_output": (FIXTURES / "case2_round0.txt").read_text(),
            "metrics": (FIXTURES / "case2_round0_metrics.txt").read_text(), "scenario": msgspec.to_builtins(scenario)}
    result = client.post("/v1/diagnoses", json=body, headers=auth(tokens["read"])).json()
    assert result["server"] is not None and not any(m.startswith(("metrics:", "slo:")) for m in result["missing"])


def test_diagnosis_errors_name_the_input_and_the_fix(client: TestClient, tokens: dict[str, str]) -> None:
    unreadable = client.post("/v1/diagnoses", json={"bench_output": "hello"}, headers=auth(tokens["read"]))
    assert unreadable.status_code == 422 and unreadable.json()["field"] == "bench_output"
    assert "bench_serving" in unreadable.json()["hint"]
    bad_metrics = client.post("/v1/diagnoses", headers=auth(tokens["read"]), json={
        "bench_output": (FIXTURES / "case1_round0.txt").read_text(), "metrics": "up 1\n"})
    assert bad_metrics.status_code == 422 and bad_metrics.json()["field"] == "metrics"
    bad_scenario = client.post("/v1/diagnoses", headers=auth(tokens["read"]), json={
        "bench_output": "x", "scenario": {"name": "s", "model": "m", "deployment": {"groups": "no"}}})
    assert bad_scenario.status_code == 422 and bad_scenario.json()["field"].startswith("scenario.deployment")
    unknown = client.post("/v1/diagnoses", json={"bench": "x"}, headers=auth(tokens["read"]))
    assert unknown.status_code == 400


@pytest.fixture
def mounted(settings: ServiceSettings, plugins: PluginHost, executor: FakeExecutor,
            tokens: dict[str, str]) -> Iterator[TestClient]:
    public = dataclasses.replace(settings, public_url="http://testserver.local")
    with TestClient(create_app(public, plugins=plugins, executor=executor)) as test_client:
        yield test_client


def _call(client: TestClient, token: str, tool: str, arguments: dict) -> dict:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    response = client.post("/mcp", json=body, headers=MCP_HEADERS | auth(token))
    assert response.status_code == 200, response.text
    return response.json()["result"]


def test_mounted_mcp_job_tools_call_the_service_in_process_with_the_callers_key(
        mounted: TestClient, tokens: dict[str, str]) -> None:
    refused = _call(mounted, tokens["read"], "start_tuning_job", JOB)
    assert refused["isError"] and "write-scoped credential" in refused["content"][0]["text"]
    started = _call(mounted, tokens["write"], "start_tuning_job", JOB)
    assert not started.get("isError"), started
    job_id = started["structuredContent"]["data"]["id"]
    assert started["structuredContent"]["links"]["report"] == f"http://testserver.local/v1/jobs/{job_id}/report"
    # The job is the service's own: the HTTP API shows it, created by the write key.
    assert mounted.get(f"/v1/jobs/{job_id}", headers=auth(tokens["read"])).status_code == 200
    polled = _call(mounted, tokens["read"], "get_job", {"job_id": job_id, "wait_seconds": 10})
    while polled["structuredContent"]["data"]["job"]["state"] not in ("succeeded", "failed"):
        polled = _call(mounted, tokens["read"], "get_job", {"job_id": job_id, "wait_seconds": 10})
    assert polled["structuredContent"]["data"]["job"]["state"] == "succeeded"
    missing = _call(mounted, tokens["read"], "get_job", {"job_id": "job_nope"})
    assert missing["isError"] and "404" in missing["content"][0]["text"]


def test_mounted_mcp_refuses_foreign_hosts_origins_and_missing_keys(mounted: TestClient,
                                                                    tokens: dict[str, str]) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    assert mounted.post("/mcp", json=init, headers=MCP_HEADERS).status_code == 401
    foreign = MCP_HEADERS | auth(tokens["read"]) | {"Origin": "https://evil.example"}
    assert mounted.post("/mcp", json=init, headers=foreign).status_code == 403
    rebound = MCP_HEADERS | auth(tokens["read"]) | {"Host": "evil.example"}
    assert mounted.post("/mcp", json=init, headers=rebound).status_code == 421
    own = MCP_HEADERS | auth(tokens["read"]) | {"Origin": "http://testserver.local"}
    assert mounted.post("/mcp", json=init, headers=own).json()["result"]["serverInfo"]["name"] == "sglang-tuner"
