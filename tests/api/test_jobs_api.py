"""Jobs over HTTP: auth and scopes, idempotent creation, listing, cancel, rounds, reports, problem+json."""

from __future__ import annotations

from litestar.testing import TestClient

from service.api.app import create_app
from tests.api.fakes import FakeExecutor, auth, wait_for_round, wait_for_state

JOB = {"playbook": "coding-assistant", "runner": "simulator"}


def test_unauthenticated_write_is_401_problem_json(client: TestClient) -> None:
    response = client.post("/v1/jobs", json=JOB)
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["type"].endswith("/unauthenticated") and body["field"] == "Authorization" and body["hint"]
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_read_scoped_key_cannot_write(client: TestClient, tokens: dict[str, str]) -> None:
    response = client.post("/v1/jobs", json=JOB, headers=auth(tokens["read"]))
    assert response.status_code == 403
    assert "'write'" in response.json()["detail"]


def test_bad_and_revoked_keys_are_401(client: TestClient, tokens: dict[str, str]) -> None:
    assert client.get("/v1/jobs", headers=auth(tokens["read"] + "x")).status_code == 401
    assert client.get("/v1/jobs", headers={"X-API-Key": tokens["read"]}).status_code == 200


def test_replayed_idempotency_key_returns_the_same_job(client: TestClient, tokens: dict[str, str]) -> None:
    headers = {**auth(tokens["write"]), "Idempotency-Key": "retry-1"}
    first = client.post("/v1/jobs", json=JOB, headers=headers)
    again = client.post("/v1/jobs", json=JOB, headers=headers)
    assert first.status_code == 202 and first.headers["location"] == f"/v1/jobs/{first.json()['id']}"
    assert again.status_code == 200
    assert first.json()["id"] == again.json()["id"]
    other = client.post("/v1/jobs", json={**JOB, "runner": "gpu-host"}, headers=headers)
    assert other.status_code == 422 and other.json()["field"] == "Idempotency-Key"


def test_job_runs_to_completion_with_rounds_and_report(client: TestClient, tokens: dict[str, str]) -> None:
    created = client.post("/v1/jobs", json=JOB, headers=auth(tokens["write"])).json()
    assert created["links"]["events"] == f"/v1/jobs/{created['id']}/events"
    done = wait_for_state(client, created["id"], tokens["read"], {"succeeded", "failed"})
    assert done["state"] == "succeeded" and done["stop_reason"] == "slo met"
    rounds = client.get(f"/v1/jobs/{created['id']}/rounds", headers=auth(tokens["read"])).json()
    assert [(r["index"], r["state"], r["decision"]["verdict"]) for r in rounds] == [
        (0, "finished", "accept"), (1, "finished", "accept"), (2, "finished", "accept")]
    report = client.get(f"/v1/jobs/{created['id']}/report", headers=auth(tokens["read"])).json()
    assert report["job"]["state"] == "succeeded" and report["job"]["stop_reason"] == "slo met"
    assert report["rounds"][2]["result"]["bench"]["output_throughput"] == 1002.0
    markdown = client.get(f"/v1/jobs/{created['id']}/report?format=markdown", headers=auth(tokens["read"]))
    assert "| 2 | chunked_prefill | 1002 |" in markdown.text and "| accept | simulated |" in markdown.text
    page = client.get(f"/v1/jobs/{created['id']}/report", headers={**auth(tokens["read"]), "Accept": "text/html"})
    assert page.headers["content-type"].startswith("text/html") and "<svg" in page.text


def test_events_stream_follows_a_job_to_its_end(client: TestClient, tokens: dict[str, str]) -> None:
    created = client.post("/v1/jobs", json=JOB, headers=auth(tokens["write"])).json()
    with client.stream("GET", f"/v1/jobs/{created['id']}/events", headers=auth(tokens["read"])) as stream:
        kinds = [line.removeprefix("event: ") for line in stream.iter_lines() if line.startswith("event: ")]
    assert kinds[0] == "job_queued" and kinds[-1] == "job_finished"
    assert kinds.count("round_started") == 3 and kinds.count("decision") == 3


def test_list_filters_and_paginates(client: TestClient, tokens: dict[str, str]) -> None:
    for n in range(5):
        client.post("/v1/jobs", json=JOB, headers={**auth(tokens["write"]), "Idempotency-Key": f"k{n}"})
    seen, cursor = [], None
    while True:
        query = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/jobs", params=query, headers=auth(tokens["read"])).json()
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 5
    none = client.get("/v1/jobs", params={"playbook": "other"}, headers=auth(tokens["read"])).json()
    assert none["items"] == []
    bad = client.get("/v1/jobs", params={"cursor": "garbage"}, headers=auth(tokens["read"]))
    assert bad.status_code == 422 and bad.json()["field"] == "cursor"
    bad_state = client.get("/v1/jobs", params={"state": "sleeping"}, headers=auth(tokens["read"]))
    assert bad_state.status_code == 400 and bad_state.headers["content-type"].startswith("application/problem+json")


def test_unknown_playbook_names_the_field_and_the_nearest_name(client: TestClient, tokens: dict[str, str]) -> None:
    response = client.post("/v1/jobs", json={"playbook": "coding-asistant"}, headers=auth(tokens["write"]))
    body = response.json()
    assert response.status_code == 422 and body["field"] == "playbook"
    assert "coding-assistant" in body["detail"] and "/v1/playbooks" in body["hint"]


def test_invalid_scenario_names_the_nested_field(client: TestClient, tokens: dict[str, str]) -> None:
    response = client.post("/v1/jobs", json={**JOB, "scenario": {"name": "x"}}, headers=auth(tokens["write"]))
    body = response.json()
    assert response.status_code == 422 and body["field"].startswith("scenario")
    assert "model" in body["detail"] or "deployment" in body["detail"]


def test_a_trace_travels_inline_and_a_trace_file_is_refused_by_name(client: TestClient, tokens: dict[str, str]
                                                                    ) -> None:
    scenario = {"name": "t", "model": "Qwen/Qwen3.6-27B", "deployment": {"groups": [{}]},
                "bench": {"dataset": "trace", "trace": {"file": "/etc/passwd"}}}
    refused = client.post("/v1/jobs", json={**JOB, "scenario": scenario}, headers=auth(tokens["write"]))
    body = refused.json()
    assert refused.status_code == 422 and body["field"] == "scenario.bench.trace.file"
    assert "bench.trace.records" in body["hint"]
    scenario["bench"]["trace"] = {"records": [{"timestamp": 0, "input_length": 900, "output_length": 20}]}
    accepted = client.post("/v1/jobs", json={**JOB, "scenario": scenario}, headers=auth(tokens["write"]))
    assert accepted.status_code == 202


def test_unknown_body_field_and_malformed_json_are_400(client: TestClient, tokens: dict[str, str]) -> None:
    unknown = client.post("/v1/jobs", json={**JOB, "colour": "red"}, headers=auth(tokens["write"]))
    assert unknown.status_code == 400 and "colour" in unknown.json()["detail"]
    broken = client.post("/v1/jobs", content=b"{not json", headers={**auth(tokens["write"]),
                                                                    "Content-Type": "application/json"})
    assert broken.status_code == 400 and broken.json()["type"].endswith("/invalid-request")


def test_oversized_body_is_413(client: TestClient, tokens: dict[str, str]) -> None:
    big = {**JOB, "scenario": {"description": "x" * 200_000}}
    response = client.post("/v1/jobs", json=big, headers=auth(tokens["write"]))
    assert response.status_code == 413 and response.json()["status"] == 413


def test_missing_job_is_404_with_a_hint(client: TestClient, tokens: dict[str, str]) -> None:
    response = client.get("/v1/jobs/job_nope", headers=auth(tokens["read"]))
    assert response.status_code == 404 and response.json()["field"] == "id" and "/v1/jobs" in response.json()["hint"]
    assert client.post("/v1/jobs/job_nope/cancel", headers=auth(tokens["write"])).status_code == 404


def test_second_job_on_one_gpu_host_waits_with_a_queue_position(settings, plugins, tokens) -> None:
    app = create_app(settings, plugins=plugins, executor=FakeExecutor(rounds=2, round_seconds=0.3))
    gpu_job = {"playbook": "coding-assistant", "runner": "gpu-host"}
    with TestClient(app) as client:
        first = client.post("/v1/jobs", json=gpu_job, headers=auth(tokens["write"])).json()
        wait_for_state(client, first["id"], tokens["read"], {"running"})
        second = client.post("/v1/jobs", json=gpu_job, headers=auth(tokens["write"])).json()
        third = client.post("/v1/jobs", json=gpu_job, headers=auth(tokens["write"])).json()
        assert second["state"] == "queued" and second["resource"] == "runner:gpu-host"
        assert (second["queue_position"], third["queue_position"]) == (1, 2)
        cancelled = client.post(f"/v1/jobs/{third['id']}/cancel", headers=auth(tokens["write"])).json()
        assert cancelled["state"] == "cancelled"
        assert wait_for_state(client, second["id"], tokens["read"], {"succeeded"})["queue_position"] is None


def test_cancel_stops_a_running_job_and_keeps_committed_rounds(settings, plugins, tokens) -> None:
    app = create_app(settings, plugins=plugins, executor=FakeExecutor(rounds=50, round_seconds=0.3))
    with TestClient(app) as client:
        job = client.post("/v1/jobs", json=JOB, headers=auth(tokens["write"])).json()
        wait_for_round(client, job["id"], tokens["read"], index=2, state="running")
        response = client.post(f"/v1/jobs/{job['id']}/cancel", headers=auth(tokens["write"]))
        assert response.status_code == 202
        done = wait_for_state(client, job["id"], tokens["read"], {"cancelled"})
        assert done["stop_reason"] == "cancelled by a user"
        rounds = client.get(f"/v1/jobs/{job['id']}/rounds", headers=auth(tokens["read"])).json()
        assert rounds and rounds[-1]["state"] == "interrupted"
        assert all(r["state"] == "finished" for r in rounds[:-1])
        again = client.post(f"/v1/jobs/{job['id']}/cancel", headers=auth(tokens["write"]))
        assert again.status_code == 202 and again.json()["state"] == "cancelled"


def test_executor_crash_fails_the_job_and_counts_a_runner_failure(settings, plugins, tokens) -> None:
    app = create_app(settings, plugins=plugins, executor=FakeExecutor(rounds=1, fail=True))
    with TestClient(app) as client:
        job = client.post("/v1/jobs", json=JOB, headers=auth(tokens["write"])).json()
        done = wait_for_state(client, job["id"], tokens["read"], {"failed"})
        assert "runner exploded" in done["stop_reason"]
        metrics = client.get("/metrics").text
        assert 'sglang_tuner_runner_failures_total{runner="simulator"} 1.0' in metrics
        assert 'sglang_tuner_jobs{state="failed"} 1.0' in metrics
        assert "sglang_tuner_round_duration_seconds_count" in metrics
