"""Input beyond the service's limits is a 400 naming the limit and the field; errors name the field sent."""

from __future__ import annotations

import json

import pytest
import structlog
from litestar import Request
from litestar.testing import TestClient

from service.api.problems import problem_response
from service.plugin_host import PluginHost
from service.store import NewJob, Store
from tests.api.fakes import auth

JSON = {"content-type": "application/json"}


def _post(client: TestClient, path: str, body: bytes, token: str) -> dict:
    response = client.post(path, content=body, headers={**JSON, **auth(token)})
    assert response.headers["content-type"].startswith("application/problem+json"), response.text
    return {"status": response.status_code, **response.json()}


def test_a_body_nested_1000_levels_is_refused_naming_the_limit(client: TestClient, tokens: dict[str, str]) -> None:
    refused = _post(client, "/v1/jobs", b"[" * 1000 + b"]" * 1000, tokens["write"])
    assert refused["status"] == 400 and refused["field"] == "body"
    assert "1000 levels" in refused["detail"] and "64" in refused["detail"]
    # Brackets inside strings are text, not nesting.
    text = _post(client, "/v1/jobs", json.dumps({"playbook": "[" * 150}).encode(), tokens["write"])
    assert text["status"] == 422 and text["field"] == "playbook"


def test_a_body_that_is_not_utf8_is_refused(client: TestClient, tokens: dict[str, str]) -> None:
    refused = _post(client, "/v1/jobs", '{"playbook": "café"}'.encode("latin-1"), tokens["write"])
    assert refused["status"] == 400 and "not UTF-8" in refused["detail"]


def test_a_nul_character_is_refused_naming_its_field(client: TestClient, tokens: dict[str, str]) -> None:
    body = json.dumps({"name": "nightly", "cron": "0 3 * * *", "job": {"playbook": "coding\u0000assistant"}})
    refused = _post(client, "/v1/schedules", body.encode(), tokens["admin"])
    assert refused["status"] == 400 and refused["field"] == "job.playbook"
    # An escaped backslash followed by "u0000" is text, not a NUL.
    literal = _post(client, "/v1/jobs", b'{"playbook": "a\\\\u0000"}', tokens["write"])
    assert literal["status"] == 422 and literal["field"] == "playbook"
    for url, field in (("/v1/jobs?playbook=a%00b", "playbook"), ("/v1/jobs/job%00x", "path")):
        answer = client.get(url, headers=auth(tokens["read"]))
        assert answer.status_code == 400 and answer.json()["field"] == field


def test_strings_and_integers_are_bounded_as_their_columns(client: TestClient, tokens: dict[str, str]) -> None:
    name = _post(client, "/v1/schedules", json.dumps(
        {"name": "n" * 10_000, "cron": "0 3 * * *", "job": {"playbook": "coding-assistant"}}).encode(), tokens["admin"])
    assert name["status"] == 400 and name["field"] == "name" and "200" in name["detail"]
    resource = _post(client, "/v1/jobs", json.dumps({"playbook": "coding-assistant", "resource": "r" * 1000}).encode(),
                     tokens["write"])
    assert resource["status"] == 400 and resource["field"] == "resource"
    job = client.post("/v1/jobs", json={"playbook": "coding-assistant"}, headers=auth(tokens["write"])).json()
    after = client.get(f"/v1/jobs/{job['id']}/events?after=2147483648", headers=auth(tokens["read"]))
    assert after.status_code == 400 and after.json()["field"] == "after"


def test_errors_name_the_field_the_user_sent(client: TestClient, tokens: dict[str, str]) -> None:
    zone = _post(client, "/v1/schedules", json.dumps({"name": "n", "cron": "0 3 * * *", "timezone": "Mars/Olympus",
                                                      "job": {"playbook": "coding-assistant"}}).encode(),
                 tokens["admin"])
    assert zone["status"] == 422 and zone["field"] == "timezone"
    gpus = _post(client, "/v1/calculators/kv-capacity", b'{"gpus": 0, "weights_gb": 27, "kv_bytes_per_token": 98304}',
                 tokens["read"])
    assert gpus["status"] == 400 and gpus["field"] == "gpus"
    weights = _post(client, "/v1/calculators/kv-capacity", b'{"gpus": 1, "weights_gb": 900, "kv_bytes_per_token": 9}',
                    tokens["read"])
    assert weights["status"] == 422 and weights["field"] == "weights_gb"
    missing = client.post("/v1/profiles", files={"log": ("requests.jsonl", b"{}\n")}, headers=auth(tokens["write"]))
    assert missing.status_code == 400 and missing.json()["field"] == "tokenizer"


def test_calculators_refuse_non_positive_and_overflowing_sizes(client: TestClient, tokens: dict[str, str]) -> None:
    cases = [("/v1/calculators/kv-per-token", {"layers": -48, "kv_heads": 8, "head_dim": 128}, "layers"),
             ("/v1/calculators/kv-per-token", {"layers": 48, "kv_heads": 0, "head_dim": 128}, "kv_heads"),
             ("/v1/calculators/required-throughput",
              {"requests": -5, "input_tokens": 100, "output_tokens": 10, "deadline_s": 60}, "requests"),
             ("/v1/calculators/required-throughput",
              {"requests": 10, "input_tokens": 1e308, "output_tokens": 1e308, "deadline_s": 1}, "input_tokens"),
             ("/v1/calculators/required-throughput",
              {"requests": 10, "input_tokens": 100, "output_tokens": 10, "deadline_s": 0}, "deadline_s")]
    for path, body, field in cases:
        refused = _post(client, path, json.dumps(body).encode(), tokens["read"])
        assert refused["status"] == 400 and refused["field"] == field, (body, refused)


def test_a_profile_error_shows_no_server_path(client: TestClient, tokens: dict[str, str]) -> None:
    answer = client.post("/v1/profiles", headers=auth(tokens["write"]), files={
        "log": ("requests.jsonl", b'{"prompt": "hi", "completion": "there"}\n'),
        "tokenizer": ("tokenizer.json", b"\xff not a tokenizer")})
    assert answer.status_code == 422 and answer.json()["field"] == "tokenizer"
    assert "/tmp" not in answer.text and "sglang-tuner-profile-" not in answer.text


def test_playbooks_name_their_scenario_file_not_its_path(client: TestClient, tokens: dict[str, str]) -> None:
    from service.api.routes.catalogue import _views  # the installed playbooks carry absolute scenario paths

    scenarios = [view.details["scenario"] for view in _views(PluginHost(), "playbook")]
    assert "coding-assistant-round0.toml" in scenarios
    assert all(scenario is None or "/" not in scenario for scenario in scenarios)


@pytest.mark.anyio
async def test_a_listing_reads_queue_positions_as_each_job_does(store: Store) -> None:
    for resource in ["host-a", None, "host-a", "host-b", None, "host-a"]:
        await store.create_job(NewJob(playbook="coding-assistant", runner="simulator", request={}, resource=resource))
    claimed = await store.claim_job("test", 60)  # the oldest leaves the queue
    assert claimed is not None
    page = await store.list_jobs()
    positions = {job.id: await store.queue_position(job) for job in page.items}
    assert page.queue_positions == {job_id: at for job_id, at in positions.items() if at is not None}
    assert sorted(page.queue_positions.values()) == [1, 1, 1, 2, 2]


def test_an_unhandled_error_logs_its_traceback() -> None:
    request: Request = Request(scope={"type": "http", "method": "POST", "path": "/v1/jobs", "headers": [],
                                      "query_string": b"", "app": None, "state": {}})  # type: ignore[arg-type]
    try:
        raise RuntimeError("the store vanished")
    except RuntimeError as exc:
        with structlog.testing.capture_logs() as logs:
            answer = problem_response(request, exc)
    assert answer.status_code == 500
    [line] = [entry for entry in logs if entry["event"] == "unhandled_error"]
    assert "RuntimeError: the store vanished" in line["traceback"]
    assert "test_an_unhandled_error_logs_its_traceback" in line["traceback"]
