"""`GET /v1/jobs/{id}` latency while 20 simulated tuning jobs run: the service's speed target.

Run: `.venv/bin/python -m bench.api [--jobs 20] [--clients 50] [--requests 100] [--think-ms 100] [--client raw]`.
Starts `sglang-tuner serve` (real uvicorn on a free loopback port, SQLite in a temp dir, `--workers` as many
as jobs), queues the jobs (coding-assistant playbook, simulated runner), waits until they all run, then has
`--clients` concurrent clients (one keep-alive connection each; `raw`: an asyncio protocol around h11 whose own
CPU stays small, `httpx`: httpx.AsyncClient) GET a job `--requests` times each, pausing `--think-ms` between
requests (100 ms: fifty pollers at ten requests a second each; 0 measures saturation). Prints one JSON
line: client-observed latency p50/p95/p99/max in ms of the requests after each client's first (which also
opens its connection; all fifty at once), the p99 with the first ones; the service's own p50/p95/p99 from
its `sglang_tuner_http_request_duration_seconds` histogram (interpolated inside buckets); errors, requests
per second, jobs running before and after; CPU seconds during the measurement of the service with its job
processes, of the API process alone and how long its threads waited for a CPU, of this client, and of every
other process on the machine (the noise); resident memory; the 1-minute load average before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import resource
import statistics
import tempfile
import time
from pathlib import Path

import h11
import httpx

from tests.api.service_process import Service, create_keys, free_port


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its children (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(value) for value in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def _run_delay_seconds(pid: int) -> float:
    """Seconds the threads of `pid` spent runnable but waiting for a CPU (Linux schedstat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            total += int((task / "schedstat").read_text().split()[1])
    return total / 1e9


def _machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot, over all CPUs (Linux /proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss_mb(pids: list[int]) -> float:
    """Resident memory of the processes, in MiB (Linux /proc)."""
    total = 0
    for pid in pids:
        status = Path(f"/proc/{pid}/status")
        if status.exists():
            line = next((x for x in status.read_text().splitlines() if x.startswith("VmRSS:")), "VmRSS: 0 kB")
            total += int(line.split()[1])
    return round(total / 1024, 1)


_GET_JOB_BUCKET = 'sglang_tuner_http_request_duration_seconds_bucket{le="'


def _server_buckets(client: httpx.Client) -> dict[float, float]:
    """Cumulative counts of the service's own `getJob` duration histogram, by upper bound in seconds."""
    buckets: dict[float, float] = {}
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(_GET_JOB_BUCKET) and 'operation="getJob"' in line:
            bound = line[len(_GET_JOB_BUCKET):].split('"', 1)[0]
            buckets[float(bound)] = float(line.rsplit(" ", 1)[1])
    return buckets


def _server_quantile(before: dict[float, float], after: dict[float, float], q: float) -> float | None:
    """The `q` quantile in ms of the requests observed between two snapshots (linear inside a bucket)."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    if not counts or counts[-1] <= 0:
        return None
    rank, lower, below = q * counts[-1], 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=True):
        if count >= rank:
            if bound == float("inf"):
                return round(lower * 1000, 2)
            return round((lower + (bound - lower) * (rank - below) / max(count - below, 1e-9)) * 1000, 2)
        lower, below = bound, count
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:  # the thread or process has just exited
        return ""


def _service_pids(root: int) -> list[int]:
    """The service process and its descendants (job worker processes, if any)."""
    pids, frontier = [root], [root]
    while frontier:
        pid = frontier.pop()
        # Each thread lists the children it started (the job processes' forkserver starts from a worker thread).
        found = [int(c) for task in Path(f"/proc/{pid}/task").glob("*/children") for c in _read(task).split()]
        pids += found
        frontier += found
    return pids


class _KeepAliveGet(asyncio.Protocol):
    """One HTTP/1.1 keep-alive connection sending one GET at a time, parsed by h11 (as httpx itself does).

    A load generator must cost far less than the service it measures: on two cores httpx.AsyncClient spent
    about twice the service's CPU per request, and its waits showed up as the service's latency. A bare
    asyncio protocol around h11's state machine keeps the protocol handling of a well-kept library and
    drops the connection pool, timeouts and header models the client does not need.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.connection = h11.Connection(h11.CLIENT)
        self.status = 0
        self.body = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.connection.receive_data(data)
        try:
            while (event := self.connection.next_event()) is not h11.NEED_DATA:
                if isinstance(event, h11.Response):
                    self.status = event.status_code
                elif isinstance(event, h11.Data):
                    self.body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    self._settle(result=(self.status, bytes(self.body)))
                    return
                elif isinstance(event, h11.ConnectionClosed):
                    break
        except h11.RemoteProtocolError as exc:
            self._settle(error=ValueError(f"malformed response: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._settle(error=exc or ConnectionResetError("the service closed the connection"))

    def _settle(self, *, result: tuple[int, bytes] | None = None, error: BaseException | None = None) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            if error is not None:
                waiter.set_exception(error)
            else:
                waiter.set_result(result or (0, b""))

    async def get(self, request: h11.Request) -> tuple[int, bytes]:
        assert self.transport is not None
        if self.connection.our_state is h11.DONE:
            self.connection.start_next_cycle()
        self.status, self.body = 0, bytearray()
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(self.connection.send(request) + self.connection.send(h11.EndOfMessage()))
        return await self.waiter


async def _raw_client(url: str, headers: dict[str, str], job_id: str, requests: int, think: float,
                      latencies: list[float], errors: list[str], firsts: list[float]) -> None:
    host, port = url.removeprefix("http://").split(":")
    request = h11.Request(method="GET", target=f"/v1/jobs/{job_id}",
                          headers=[("Host", f"{host}:{port}"), *headers.items()])
    connection: _KeepAliveGet | None = None
    for number in range(requests):
        started = time.perf_counter()
        try:
            if connection is None or connection.transport is None or connection.transport.is_closing():
                _, connection = await asyncio.get_running_loop().create_connection(_KeepAliveGet, host, int(port))
            status, body = await asyncio.wait_for(connection.get(request), 10)
            if status != 200 or (number == 0 and json.loads(body)["id"] != job_id):
                errors.append(f"HTTP {status}")
        except (OSError, ValueError, TimeoutError) as exc:
            errors.append(type(exc).__name__)
            connection = None
        # A client's first request also opens its connection: kept apart, all fifty open at the same instant.
        (firsts if number == 0 else latencies).append((time.perf_counter() - started) * 1000)
        if think:
            await asyncio.sleep(think)
    if connection is not None and connection.transport is not None:
        connection.transport.close()


async def _httpx_client(client: httpx.AsyncClient, job_id: str, requests: int, think: float,
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
            (firsts if number == 0 else latencies).append((time.perf_counter() - started) * 1000)
            if think:
                await asyncio.sleep(think)


async def _clients(url: str, headers: dict[str, str], ids: list[str], args: argparse.Namespace,
                   latencies: list[float], errors: list[str], firsts: list[float]) -> None:
    think = args.think_ms / 1000
    if args.client == "raw":
        await asyncio.gather(*(_raw_client(url, headers, ids[i % len(ids)], args.requests, think, latencies, errors,
                                           firsts) for i in range(args.clients)))
        return
    # Built before the clock starts: an httpx client loads its CA bundle when made, tens of ms of CPU each.
    clients = [httpx.AsyncClient(base_url=url, headers=headers, timeout=10) for _ in range(args.clients)]
    await asyncio.gather(*(_httpx_client(client, ids[i % len(ids)], args.requests, think, latencies,
                                         errors, firsts) for i, client in enumerate(clients)))


def _start_jobs(client: httpx.Client, count: int) -> list[str]:
    ids = [client.post("/v1/jobs", json={"playbook": "coding-assistant"}).json()["id"] for _ in range(count)]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _running(client, ids) < count:
        time.sleep(0.2)
    return ids


def _job_processes(root: int) -> int:
    """Descendants of the service in Linux's idle scheduling class: the job processes."""
    def policy(pid: int) -> int:
        fields = _read(Path(f"/proc/{pid}/stat")).rsplit(")", 1)[-1].split()
        return int(fields[38]) if len(fields) > 38 else -1  # field 41 of proc(5), "policy"
    return sum(policy(pid) == os.SCHED_IDLE for pid in _service_pids(root)[1:])


def _wait_for_job_processes(root: int, jobs: int) -> None:
    """Until every running job's process exists: the API reports a job running once it is claimed, while
    its process may still be starting."""
    deadline = time.monotonic() + 120
    while _job_processes(root) < jobs and time.monotonic() < deadline:
        time.sleep(0.2)
    if _job_processes(root) < jobs:
        raise SystemExit(f"only {_job_processes(root)} of {jobs} job processes started")


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
                _wait_for_job_processes(service.process.pid, args.jobs)
                pids = _service_pids(service.process.pid)
                cpu_before, load_before = {pid: _cpu_seconds(pid) for pid in pids}, os.getloadavg()[0]
                server_before, client_cpu_before = _server_buckets(admin), _own_cpu_seconds()
                busy_before = _machine_busy_seconds()
                api_cpu_before, waited_before = _cpu_seconds(service.process.pid), _run_delay_seconds(service.process.pid)
                latencies: list[float] = []
                errors: list[str] = []
                firsts: list[float] = []
                started = time.perf_counter()
                asyncio.run(_clients(service.url, headers, ids, args, latencies, errors, firsts))
                # (the wall time includes building the clients; requests_per_s is a lower bound)
                wall = time.perf_counter() - started
                # Job processes still starting when the clients began count from zero.
                cpu = sum(_cpu_seconds(pid) - cpu_before.get(pid, 0.0)
                          for pid in set(pids) | set(_service_pids(service.process.pid)) if Path(f"/proc/{pid}").exists())
                client_cpu = _own_cpu_seconds() - client_cpu_before
                others_cpu = _machine_busy_seconds() - busy_before - client_cpu - cpu
                api_cpu = _cpu_seconds(service.process.pid) - api_cpu_before
                api_waited = _run_delay_seconds(service.process.pid) - waited_before
                server_after = _server_buckets(admin)
                rss = _rss_mb(_service_pids(service.process.pid))
                running_after = _running(admin, ids)
        finally:
            service.stop()
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    every = statistics.quantiles(latencies + firsts, n=100, method="inclusive")
    return {
        "benchmark": "api_get_job", "jobs": args.jobs, "clients": args.clients,
        "requests": len(latencies) + len(firsts),
        "think_ms": args.think_ms, "client": args.client, "errors": len(errors), "error_kinds": sorted(set(errors)),
        "p50_ms": round(cuts[49], 2), "p95_ms": round(cuts[94], 2), "p99_ms": round(cuts[98], 2), "max_ms": round(max(latencies), 2),
        "p99_with_first_ms": round(every[98], 2), "first_request_max_ms": round(max(firsts), 2),
        "server_p50_ms": _server_quantile(server_before, server_after, 0.50),
        "server_p95_ms": _server_quantile(server_before, server_after, 0.95),
        "server_p99_ms": _server_quantile(server_before, server_after, 0.99),
        "requests_per_s": round(len(latencies) / wall, 1), "wall_s": round(wall, 2),
        "jobs_running_before": running_before, "jobs_running_after": running_after,
        "service_cpu_s": round(cpu, 2), "service_rss_mb": rss,
        "api_process_cpu_s": round(api_cpu, 2), "api_process_cpu_wait_s": round(api_waited, 2),
        "client_cpu_s": round(client_cpu, 2), "other_processes_cpu_s": round(others_cpu, 2), "load_1m_before": round(load_before, 2),
        "load_1m_after": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(), "python": platform.python_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=100, help="requests per client")
    parser.add_argument("--think-ms", type=float, default=100.0, help="pause between a client's requests")
    parser.add_argument("--client", choices=("raw", "httpx"), default="raw",
                        help="raw: one keep-alive connection per client, an asyncio protocol around h11 (the load "
                             "generator's own CPU kept small); httpx: one httpx.AsyncClient per client")
    print(json.dumps(measure(parser.parse_args())), flush=True)


if __name__ == "__main__":
    main()
