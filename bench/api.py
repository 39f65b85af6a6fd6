"""`GET /v1/jobs/{id}` latency while 20 simulated tuning jobs run: the service's speed target.

Run: `.venv/bin/python -m bench.api [--jobs 20] [--clients 50] [--requests 100] [--think-ms 100]`. Starts
`sglang-tuner serve` (real uvicorn on a free loopback port, SQLite in a temp dir, `--workers` as many as
jobs), queues the jobs (coding-assistant playbook, simulated runner), waits until they all run, then has
`--clients` concurrent httpx clients (one connection each) GET a job `--requests` times each, pausing
`--think-ms` between requests (100 ms: fifty pollers at ten requests a second each; 0 measures saturation,
where latency is only concurrency over throughput). Prints one JSON line: latency p50/p99/max in ms of the
requests after each client's first (which also opens its connection; all fifty at once), the p99 with the
first ones and their maximum, errors, requests per second, how many jobs were running before and after the
measurement, the 1-minute load average before and after, and the CPU seconds (during the measurement) and
resident memory (at its end) of the service and its job processes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from tests.api.service_process import Service, create_keys, free_port


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its children (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(value) for value in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def _rss_mb(pids: list[int]) -> float:
    """Resident memory of the processes, in MiB (Linux /proc)."""
    total = 0
    for pid in pids:
        status = Path(f"/proc/{pid}/status")
        if status.exists():
            line = next((x for x in status.read_text().splitlines() if x.startswith("VmRSS:")), "VmRSS: 0 kB")
            total += int(line.split()[1])
    return round(total / 1024, 1)


def _service_pids(root: int) -> list[int]:
    """The service process and its descendants (job worker processes, if any)."""
    pids, frontier = [root], [root]
    while frontier:
        pid = frontier.pop()
        children = Path(f"/proc/{pid}/task/{pid}/children")
        found = [int(c) for c in children.read_text().split()] if children.exists() else []
        pids += found
        frontier += found
    return pids


async def _client(client: httpx.AsyncClient, job_id: str, requests: int, think: float,
                  latencies: list[float], errors: list[str], firsts: list[float]) -> None:
    async with client:
        for number in range(requests):
            started = time.perf_counter()
            try:
                response = await client.get(f"/v1/jobs/{job_id}")
                if response.status_code != 200:
                    errors.append(f"HTTP {response.status_code}")
            except httpx.HTTPError as exc:
                errors.append(type(exc).__name__)
            # A client's first request also opens its connection: kept apart, all fifty open at the same instant.
            (firsts if number == 0 else latencies).append((time.perf_counter() - started) * 1000)
            if think:
                await asyncio.sleep(think)


async def _clients(url: str, headers: dict[str, str], ids: list[str], args: argparse.Namespace,
                   latencies: list[float], errors: list[str], firsts: list[float]) -> None:
    # Built before the clock starts: an httpx client loads its CA bundle when made, tens of ms of CPU each.
    clients = [httpx.AsyncClient(base_url=url, headers=headers, timeout=10) for _ in range(args.clients)]
    await asyncio.gather(*(_client(client, ids[i % len(ids)], args.requests, args.think_ms / 1000, latencies,
                                   errors, firsts) for i, client in enumerate(clients)))


def _start_jobs(client: httpx.Client, count: int) -> list[str]:
    ids = [client.post("/v1/jobs", json={"playbook": "coding-assistant"}).json()["id"] for _ in range(count)]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _running(client, ids) < count:
        time.sleep(0.2)
    return ids


def _idle_job(client: httpx.Client) -> list[str]:
    """A job to read when none should run (`--jobs 0`, the baseline): one benchmark round, finished."""
    job_id = client.post("/v1/jobs", json={"playbook": "coding-assistant", "kind": "round"}).json()["id"]
    deadline = time.monotonic() + 120
    while client.get(f"/v1/jobs/{job_id}", params={"wait": 10}).json()["state"] not in ("succeeded", "failed"):
        if time.monotonic() > deadline:
            raise SystemExit(f"the baseline job {job_id} did not finish")
    return [job_id]


def _running(client: httpx.Client, ids: list[str]) -> int:
    return sum(client.get(f"/v1/jobs/{job_id}").json()["state"] == "running" for job_id in ids)


def measure(args: argparse.Namespace) -> dict[str, object]:
    """Start the service and the jobs, then hammer `GET /v1/jobs/{id}`; returns the figures."""
    with tempfile.TemporaryDirectory(prefix="sglang-tuner-bench-") as folder:
        db = Path(folder) / "tuner.db"
        token = create_keys(db, ["write"])["write"]
        # The service's default lease (30 s, a heartbeat every 10 s), not the tests' short one.
        service = Service(db, free_port(), "--workers", str(max(args.jobs, 1)), "--lease-seconds", "30")
        service.start()
        headers = {"Authorization": f"Bearer {token}"}
        try:
            with httpx.Client(base_url=service.url, headers=headers, timeout=30) as admin:
                ids = _start_jobs(admin, args.jobs) if args.jobs else _idle_job(admin)
                running_before = _running(admin, ids)
                assert service.process is not None
                pids = _service_pids(service.process.pid)
                cpu_before, load_before = sum(map(_cpu_seconds, pids)), os.getloadavg()[0]
                latencies: list[float] = []
                errors: list[str] = []
                firsts: list[float] = []
                started = time.perf_counter()
                asyncio.run(_clients(service.url, headers, ids, args, latencies, errors, firsts))
                # (the wall time includes building the clients; requests_per_s is a lower bound)
                wall = time.perf_counter() - started
                cpu = sum(_cpu_seconds(pid) for pid in pids if Path(f"/proc/{pid}").exists()) - cpu_before
                rss = _rss_mb(_service_pids(service.process.pid))
                running_after = _running(admin, ids)
        finally:
            service.stop()
    cuts = statistics.quantiles(latencies, n=100)
    every = statistics.quantiles(latencies + firsts, n=100)
    return {
        "benchmark": "api_get_job", "jobs": args.jobs, "clients": args.clients,
        "requests": len(latencies) + len(firsts),
        "think_ms": args.think_ms, "errors": len(errors), "error_kinds": sorted(set(errors)),
        "p50_ms": round(cuts[49], 2), "p99_ms": round(cuts[98], 2), "max_ms": round(max(latencies), 2),
        "p99_with_first_ms": round(every[98], 2), "first_request_max_ms": round(max(firsts), 2),
        "requests_per_s": round(len(latencies) / wall, 1), "wall_s": round(wall, 2),
        "jobs_running_before": running_before, "jobs_running_after": running_after,
        "service_cpu_s": round(cpu, 2), "service_rss_mb": rss, "load_1m_before": round(load_before, 2),
        "load_1m_after": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(), "python": platform.python_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=100, help="requests per client")
    parser.add_argument("--think-ms", type=float, default=100.0, help="pause between a client's requests")
    print(json.dumps(measure(parser.parse_args())), flush=True)


if __name__ == "__main__":
    main()
