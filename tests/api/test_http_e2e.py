"""The service over real HTTP: `sglang-tuner serve` in a subprocess, the real engine, SSE, kill -9 and resume."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.service_process import Service, create_key, free_port

pytestmark = pytest.mark.slow

JOB = {"playbook": "coding-assistant"}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    running = Service(tmp_path / "tuner.db", free_port())
    yield running
    running.stop()


def _token(db: Path, scope: str) -> str:
    return create_key(db, scope, "e2e")


def _wait(client: httpx.Client, path: str, done: callable, timeout: float = 60.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(path).json()
        if done(body):
            return body
        time.sleep(0.05)
    raise AssertionError(f"{path} never reached the expected state: {body}")


def test_job_over_http_with_sse_to_completion_and_report(service: Service) -> None:
    token = _token(service.db, "write")
    service.start()
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        job = client.post("/v1/jobs", json=JOB).json()
        events = []
        with client.stream("GET", f"/v1/jobs/{job['id']}/events") as stream:
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    events.append(line.removeprefix("event: "))
        assert events[0] == "job_queued" and events[-1] == "job_finished"
        assert {"round_started", "round_finished", "decision"} <= set(events)
        report = client.get(f"/v1/jobs/{job['id']}/report").json()
        assert report["job"]["state"] == "succeeded" and report["rounds"][0]["technique"] == "baseline"
        assert report["final"]["launch_commands"] and report["headline"][0].startswith("**succeeded**")
        page = client.get(f"/v1/jobs/{job['id']}/report", params={"format": "html"})
        assert "<svg" in page.text


def test_kill_9_mid_round_then_restart_resumes_without_losing_or_duplicating_rounds(service: Service) -> None:
    token = _token(service.db, "write")
    service.start()
    client = httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    job = client.post("/v1/jobs", json=JOB).json()
    rounds_path = f"/v1/jobs/{job['id']}/rounds"
    before = _wait(client, rounds_path, lambda rs: len(rs) >= 3 and rs[-1]["state"] == "running")
    service.kill()
    committed = {r["index"]: r for r in before if r["state"] == "finished"}

    service.start()
    done = _wait(client, f"/v1/jobs/{job['id']}", lambda j: j["state"] in {"succeeded", "failed"})
    assert done["state"] == "succeeded" and done["attempt"] == 2
    after = client.get(rounds_path).json()
    assert [r["index"] for r in after] == list(range(len(after)))  # none duplicated, none missing
    for index, kept in committed.items():
        assert json.dumps(after[index], sort_keys=True) == json.dumps(kept, sort_keys=True)
    # The round running at the kill (and any started with it) is recorded, then re-run as a new round.
    interrupted = [r["index"] for r in after if r["state"] == "interrupted"]
    assert before[-1]["index"] in interrupted and not set(interrupted) & set(committed)
    retried = sorted(r["retry_of"] for r in after if r["retry_of"] is not None)
    assert retried == sorted(interrupted)
    client.close()


def test_kill_9_between_two_alternatives_keeps_the_measured_one_after_resume(service: Service) -> None:
    # document-qa-rag's router step measures round_robin and cache_aware, each against the same TP4 baseline
    # (casebook case 2, round 1): the group is decided only when both are measured.
    token = _token(service.db, "write")
    service.start()
    client = httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    job = client.post("/v1/jobs", json={"playbook": "document-qa-rag"}).json()
    rounds_path = f"/v1/jobs/{job['id']}/rounds"
    before = _wait(client, rounds_path, lambda rs: len(rs) >= 3 and rs[1]["state"] == "measured"
                   and rs[2]["state"] == "running", timeout=300)
    service.kill()
    measured = before[1]
    assert measured["decision"] is None and measured["results"]  # measured, its group not yet decided

    service.start()
    done = _wait(client, f"/v1/jobs/{job['id']}", lambda j: j["state"] not in {"queued", "running"}, timeout=300)
    assert done["state"] == "succeeded" and done["attempt"] == 2
    after = client.get(rounds_path).json()
    kept = after[1]
    # The measured alternative was kept through the restart: the same round, the same figures, now decided.
    assert kept["state"] == "finished" and kept["decision"]["verdict"] in {"accept", "rollback", "keep_tradeoff"}
    assert json.dumps(kept["results"], sort_keys=True) == json.dumps(measured["results"], sort_keys=True)
    assert any("measured before the job was restarted" in reason for reason in kept["decision"]["reasons"])
    summary = measured["summary"]
    assert [r["index"] for r in after if r["summary"] == summary] == [1]  # never measured again
    # The alternative cut off by the kill is interrupted and re-run as a new round pointing at it.
    assert after[2]["state"] == "interrupted"
    retry = [r for r in after if r["retry_of"] == 2]
    assert len(retry) == 1 and retry[0]["summary"] == after[2]["summary"] and retry[0]["state"] == "finished"
    client.close()
