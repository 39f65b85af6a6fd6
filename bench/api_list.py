"""`GET /v1/jobs` latency with 1,000 stored jobs and 20 concurrent clients: the listing's speed target.

Run: `.venv/bin/python -m bench.api_list [--jobs 1000] [--clients 20] [--requests 100] [--think-ms 0]`.
Seeds a SQLite database in a temp dir with `--jobs` jobs as a service that has run for a while holds them:
one in twenty queued behind a runner resource (a GPU host) that one running job holds, the rest finished,
each with the report of a real `tune --json` run of the coding-assistant playbook on the simulator (about
50 KB; `--report FILE` to use another). Then starts `sglang-tuner serve` (real uvicorn on a free loopback
port) and has `--clients` clients (one keep-alive connection each, bench.api's h11 client) list the first page
(50 jobs, newest first) `--requests` times each, `--think-ms` apart (0: closed loop, each client sends its
next request as soon as it has the answer). Prints one JSON line: client-observed p50/p95/p99/max in ms of
the requests after each client's first, the service's own p50/p95/p99 for `listJobs` from `/metrics`,
errors, requests per second, the jobs on the page, and the CPU seconds of the service and of every other
process on the machine during the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import h11
import httpx

from bench.api import _cpu_seconds, _KeepAliveGet, _machine_busy_seconds, _own_cpu_seconds, _server_quantile
from service.domain import JobState
from service.store import NewJob, Scope, open_store
from tests.api.service_process import Service, free_port

HOLDER_RESOURCE = "gpu-host:bench-1"
_BUCKET = 'sglang_tuner_http_request_duration_seconds_bucket{le="'


def tuned_report() -> dict[str, Any]:
    """The JSON report of one real `tune --json` run (coding-assistant, simulated): what a finished job stores."""
    cli = Path(sys.executable).with_name("sglang-tuner")
    done = subprocess.run([str(cli), "tune", "--playbook", "coding-assistant", "--json"], capture_output=True,
                          text=True, check=True)
    report: dict[str, Any] = json.loads(done.stdout)
    return report


async def seed(db: Path, jobs: int, report: dict[str, Any]) -> str:
    """`jobs` jobs, newest last: every twentieth queued behind the held resource, the others finished."""
    store = open_store(str(db))
    await store.migrate()
    _, token = await store.create_api_key("bench-read", [Scope.READ])
    request = {"playbook": "coding-assistant", "kind": "tune"}
    await store.create_job(NewJob(playbook="coding-assistant", runner="simulated", request=request,
                                  resource=HOLDER_RESOURCE))
    # An hour's lease: the service's reaper leaves the holder running, so the queued jobs stay queued.
    holder = await store.claim_job("bench-seed", 3600)
    assert holder is not None
    for number in range(jobs - 1):
        if number % 20 == 0:
            await store.create_job(NewJob(playbook="coding-assistant", runner="simulated", request=request,
                                          resource=HOLDER_RESOURCE))
            continue
        await store.create_job(NewJob(playbook="coding-assistant", runner="simulated", request=request))
        claimed = await store.claim_job("bench-seed", 60)
        assert claimed is not None and claimed.resource is None
        state = JobState.FAILED if number % 7 == 0 else JobState.SUCCEEDED
        await store.finish_job(claimed.id, "bench-seed", state, "finished", report)
    await store.close()
    return token


def _list_buckets(client: httpx.Client) -> dict[float, float]:
    """Cumulative counts of the service's own `listJobs` duration histogram, by upper bound in seconds."""
    buckets: dict[float, float] = {}
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(_BUCKET) and 'operation="listJobs"' in line:
            buckets[float(line[len(_BUCKET):].split('"', 1)[0])] = float(line.rsplit(" ", 1)[1])
    return buckets


async def _client(url: str, token: str, requests: int, think: float, latencies: list[float],
                  errors: list[str]) -> None:
    host, port = url.removeprefix("http://").split(":")
    request = h11.Request(method="GET", target="/v1/jobs",
                          headers=[("Host", f"{host}:{port}"), ("Authorization", f"Bearer {token}")])
    _, connection = await asyncio.get_running_loop().create_connection(_KeepAliveGet, host, int(port))
    for number in range(requests):
        started = time.perf_counter()
        try:
            status, body = await asyncio.wait_for(connection.get(request), 30)
            if status != 200 or (number == 0 and len(json.loads(body)["items"]) != 50):
                errors.append(f"HTTP {status}")
        except (OSError, ValueError, TimeoutError) as exc:
            errors.append(type(exc).__name__)
            return
        if number:  # the first request of each client also warms its connection
            latencies.append((time.perf_counter() - started) * 1000)
        if think:
            await asyncio.sleep(think)
    assert connection.transport is not None
    connection.transport.close()


async def _clients(url: str, token: str, args: argparse.Namespace, latencies: list[float],
                   errors: list[str]) -> None:
    await asyncio.gather(*(_client(url, token, args.requests, args.think_ms / 1000, latencies, errors)
                           for _ in range(args.clients)))


def measure(args: argparse.Namespace) -> dict[str, object]:
    """Seed the jobs, start the service, list the jobs from every client at once; returns the figures."""
    report = json.loads(Path(args.report).read_text()) if args.report else tuned_report()
    with tempfile.TemporaryDirectory(prefix="sglang-tuner-bench-list-") as folder:
        db = Path(folder) / "tuner.db"
        token = asyncio.run(seed(db, args.jobs, report))
        service = Service(db, free_port(), "--workers", "1", "--lease-seconds", "30")
        service.start()
        try:
            with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as admin:
                page = admin.get("/v1/jobs").json()["items"]
                assert service.process is not None
                pid = service.process.pid
                before, cpu_before, busy_before = _list_buckets(admin), _cpu_seconds(pid), _machine_busy_seconds()
                client_before = _own_cpu_seconds()
                latencies: list[float] = []
                errors: list[str] = []
                started = time.perf_counter()
                asyncio.run(_clients(service.url, token, args, latencies, errors))
                wall = time.perf_counter() - started
                cpu, client_cpu = _cpu_seconds(pid) - cpu_before, _own_cpu_seconds() - client_before
                others = _machine_busy_seconds() - busy_before - cpu - client_cpu
                after = _list_buckets(admin)
        finally:
            service.stop()
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "benchmark": "api_list_jobs", "stored_jobs": args.jobs, "clients": args.clients, "think_ms": args.think_ms,
        "requests": len(latencies), "errors": len(errors), "error_kinds": sorted(set(errors)),
        "page_states": {state: sum(item["state"] == state for item in page) for state in {i["state"] for i in page}},
        "report_bytes": len(json.dumps(report)),
        "p50_ms": round(cuts[49], 2), "p95_ms": round(cuts[94], 2), "p99_ms": round(cuts[98], 2),
        "max_ms": round(max(latencies), 2),
        "server_p50_ms": _server_quantile(before, after, 0.50), "server_p99_ms": _server_quantile(before, after, 0.99),
        "requests_per_s": round(len(latencies) / wall, 1), "service_cpu_s": round(cpu, 2),
        "client_cpu_s": round(client_cpu, 2), "other_processes_cpu_s": round(others, 2),
        "cpus": os.cpu_count(), "python": platform.python_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="jobs stored before the service starts")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=100, help="requests per client")
    parser.add_argument("--think-ms", type=float, default=0.0, help="pause between a client's requests")
    parser.add_argument("--report", help="a `tune --json` report to store with each finished job (default: run one)")
    print(json.dumps(measure(parser.parse_args())), flush=True)


if __name__ == "__main__":
    main()
