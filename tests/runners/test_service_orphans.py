"""No orphan, ever, in the service: `kill -9` of `sglang-tuner serve` while a `local`-runner job runs a round
leaves no process of that round, and the restarted service resumes the job to its end.

Two lines of defence are checked: the parent-death signal, which ends a round's processes with the service;
and, on a host without it, the process registry, from which the retried round ends what the dead service
left behind and says so in its notes.

The job runs the project's emulator workers behind the real sglang-router on loopback ports picked free for
the test (not remapped by the runner), so a survivor of the kill would hold a port the retried round needs
and fail it with `port_in_use`. Whatever the test started is killed in its `finally`, by recorded PID and
start time, even on failure.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import random
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from plugins.runners.local.lifetime import alive
from plugins.runners.local.ports import ephemeral_range
from plugins.runners.local.readiness import port_free
from service.scenario import load_scenario
from tests.api.service_process import CLI, Service, create_keys, free_port, wait_ready

from .conftest import EXAMPLES, ROOT
from .test_orphans import _kill_recorded, _port_open, _records, _running, _wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("sglang_router") is None, reason="sglang-router is not installed"),
]

UP_S = 120.0  # the job queued, its first round's workers healthy and the router listening, on two busy cores
GONE_S = 15.0
JOB_S = 300.0  # the resumed job to its end: a handful of rounds of a few seconds each, plus start-ups
ENDED = {"succeeded", "slo_not_met", "failed", "cancelled"}


def _fixed_ports(size: int) -> int:
    """The first of `size` free loopback ports below the kernel's ephemeral range, as a deployment names them.

    A port of the ephemeral range can become the local end of some outgoing connection between two rounds,
    and a round that needs it would fail with `port_in_use` for no fault of the runner (its message says so).
    """
    ephemeral = ephemeral_range()[0]
    for _ in range(200):
        start = random.randrange(20000, ephemeral - size)
        if all(port_free("127.0.0.1", port) for port in range(start, start + size)):
            return start
    raise AssertionError(f"no {size} consecutive free ports below {ephemeral}")


def _scenario() -> dict[str, Any]:
    """Two emulated workers behind the router (cache_aware), on free ports, with rounds of a few seconds."""
    base = load_scenario(EXAMPLES / "two-workers-cache-aware.toml")
    deployment = base.deployment
    # One block: the workers' ports, then the router's and its metrics port.
    workers = _fixed_ports(deployment.groups[0].replicas + 2)
    router_port = workers + deployment.groups[0].replicas
    # Chunked prefill already at the sweep's smallest size: with the latency SLO below, `auto` runs the
    # routing and cache steps of casebook case 2 and no chunk sweep, so the job stays a handful of rounds.
    server = msgspec.structs.replace(deployment.groups[0].server, chunked_prefill_size=2048)
    group = msgspec.structs.replace(deployment.groups[0], base_port=workers, server=server)
    router = msgspec.structs.replace(deployment.router, port=router_port, prometheus_port=router_port + 1)
    bench = msgspec.structs.replace(base.bench, num_prompts=24, max_concurrency=6, warmup_requests=2)
    # Casebook case 2's target: a latency SLO holds the batch where it is (no batch-parameter probes).
    slo = msgspec.structs.replace(base.slo, ttft_p95_ms=1500.0)
    objective = msgspec.structs.replace(base.objective, kind="latency")
    scenario = msgspec.structs.replace(
        base, bench=bench, slo=slo, objective=objective,
        deployment=msgspec.structs.replace(deployment, groups=[group], router=router))
    return msgspec.to_builtins(scenario)  # type: ignore[no-any-return]


class LoggedService(Service):
    """`sglang-tuner serve` with its output kept in a file, so a failing test can show what the service said,
    and every process its rounds recorded, so the test can kill what is left whatever happened."""

    def __init__(self, db: Path, port: int, log: Path) -> None:
        super().__init__(db, port)
        self.log = log
        self.recorded: list[dict[str, Any]] = []

    def start(self) -> None:
        env = {**os.environ, "SGLANG_TUNER_DB": str(self.db)}
        with self.log.open("ab") as out:
            self.process = subprocess.Popen([CLI, "serve", "--port", str(self.port), "--lease-seconds", "2"],
                                            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        if not wait_ready(self.url, 60, poll=0.2):
            raise AssertionError(f"the service did not become ready: {self.tail()}")

    def tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-3000:]
        return ""


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The runner's process registry for the service under test, and fast emulated rounds."""
    directory = tmp_path / "state"
    for name, value in {"ENGINE": "emulator", "TIME_SCALE": "0.5", "STATE_DIR": str(directory),
                        "LOG_DIR": str(tmp_path / "logs"), "REMAP_PORTS": "0"}.items():
        monkeypatch.setenv(f"SGLANG_TUNER_RUNNER_{name}", value)
    return directory


@pytest.fixture
def service(tmp_path: Path, state: Path) -> Iterator[LoggedService]:
    """The service; on the way out it is stopped, and every process any round recorded is killed."""
    running = LoggedService(tmp_path / "tuner.db", free_port(), tmp_path / "service.log")
    try:
        yield running
    finally:
        running.stop()
        for record in _records(state):
            running.recorded.extend(record["processes"])
        _kill_recorded(running.recorded)


def _live_round(state: Path, owner: int) -> list[dict[str, Any]] | None:
    """The processes `owner` recorded for its round once the router is launched (after every worker is
    healthy) and listening, each still the process the record names."""
    for record in _records(state):
        processes = record["processes"]
        router = next((p for p in processes if p["kind"] == "router" and p["pid"]), None)
        workers = [p for p in processes if p["kind"] == "worker" and p["pid"]]
        if record["owner"]["pid"] == owner and router is not None and len(workers) == 2 \
                and all(alive(p["pid"], p["start_time"]) for p in processes) and _port_open(router["port"]):
            return list(processes)
    return None


def _get(client: httpx.Client, path: str) -> Any:
    answer = client.get(path)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _kill_mid_round(service: LoggedService, state: Path, client: httpx.Client) -> tuple[str, int, list[dict[str, Any]]]:
    """Start the job, wait for a round's workers and router, kill -9 the service: (job id, the round
    running at the kill, the processes it recorded)."""
    # `auto` carries no bench of its own, so the scenario's short rounds stand.
    assert "auto" in {p["name"] for p in _get(client, "/v1/playbooks")}
    created = client.post("/v1/jobs", json={"playbook": "auto", "runner": "local", "scenario": _scenario(),
                                            "repeats": 1})
    assert created.status_code == 202, created.text
    assert service.process is not None
    owner = service.process.pid
    processes = _wait_until(lambda: _live_round(state, owner), UP_S, f"no round came up: {service.tail()}")
    service.recorded.extend(processes)
    running = [r for r in _get(client, f"/v1/jobs/{created.json()['id']}/rounds") if r["state"] == "running"]
    assert len(running) == 1, running
    service.kill()
    return created.json()["id"], running[0]["index"], processes


def _resume_to_end(service: LoggedService, client: httpx.Client, job_id: str, interrupted: int) -> list[dict[str, Any]]:
    """Restart the service and wait for the job's end; check its rounds and hand back the interrupted
    round's retry."""
    service.start()
    done = _wait_until(lambda: (j := _get(client, f"/v1/jobs/{job_id}"))["state"] in ENDED and j, JOB_S,
                       "the resumed job did not end")
    rounds = _get(client, f"/v1/jobs/{job_id}/rounds")
    summary = [(r["index"], r["technique"], r["state"], r["retry_of"]) for r in rounds]
    assert done["state"] in {"succeeded", "slo_not_met"}, (done, summary, service.tail())
    assert done["attempt"] == 2
    assert rounds[interrupted]["state"] == "interrupted", summary
    retries = [r for r in rounds if r["retry_of"] == interrupted]
    assert len(retries) == 1 and retries[0]["state"] == "finished", summary
    assert retries[0]["technique"] == rounds[interrupted]["technique"] and retries[0]["results"]
    assert len([r for r in rounds if r["state"] == "finished"]) >= 2, summary
    results = [result for r in rounds for result in r["results"]]
    errors = [result["error"] for result in results if result["error"]]
    assert not [e for e in errors if "port_in_use" in e], errors
    launched = [p for result in results for p in result["provenance"]["processes"]]
    assert launched and all(p["pid"] and p["start_time"] for p in launched)
    service.recorded.extend(launched)
    assert _running(service.recorded) == []
    return retries[0]


def _orphan_notes(round_: dict[str, Any]) -> list[str]:
    return [note for result in round_["results"] for note in result["notes"] if note.startswith("orphans:")]


def test_kill_9_of_the_service_mid_round_leaves_no_process_and_the_job_resumes(
        service: LoggedService, state: Path) -> None:
    service.start()
    token = create_keys(service.db, ["write"])["write"]
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        job_id, interrupted, processes = _kill_mid_round(service, state, client)
        # No teardown ran: the parent-death signal ends the workers and the router, and theirs their children.
        _wait_until(lambda: _running(processes) == [], GONE_S, f"{_running(processes)} still run after kill -9")
        retry = _resume_to_end(service, client, job_id, interrupted)
    assert _orphan_notes(retry) == []  # nothing was left for the sweep to end
    assert _records(state) == []  # every round closed its record; the dead owner's was swept


def _without_parent_death_signal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The service runs as on a host without PR_SET_PDEATHSIG (`lifetime._prctl` finds none, as off Linux)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import plugins.runners.local.lifetime as lifetime\n"
                                          "lifetime._prctl = lambda: None\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))


def test_without_the_parent_death_signal_the_retried_round_ends_the_leftovers_and_says_so(
        service: LoggedService, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _without_parent_death_signal(tmp_path, monkeypatch)
    service.start()
    token = create_keys(service.db, ["write"])["write"]
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        dead_owner = service.process.pid if service.process else 0
        job_id, interrupted, processes = _kill_mid_round(service, state, client)
        time.sleep(2.0)  # what the parent-death signal would have ended by now
        left = _running(processes)
        assert {p["pid"] for p in processes} <= set(left) and len(left) >= 5, left  # and each emulator's child
        retry = _resume_to_end(service, client, job_id, interrupted)
    [note] = _orphan_notes(retry)
    for process in processes:
        assert f"{process['name']} (pid {process['pid']}, " in note and f":{process['port']})" in note
    assert f"dead owner (pid {dead_owner}: " in note and "sglang-tuner serve" in note
    assert _records(state) == []
