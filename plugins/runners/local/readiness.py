"""Readiness: a port that accepts, `/health` 200 after SGLang's own warm-up, then the server's metadata.

Metadata comes from `/model_info` and `/server_info`, falling back to the deprecated `/get_model_info` and
`/get_server_info` that older versions serve (0.5.2 has only those), as the router does
(`core/steps/worker/local/discover_metadata.rs`). The router is ready when `/readiness` says every worker
is healthy. Every wait watches the processes: a process that exits fails the phase at once.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import httpx

from plugins.runners.local.failures import RoundFailure, dead_process, exited
from plugins.runners.local.processes import ServerProcess

POLL_S = 0.1


def port_open(url: str) -> bool:
    """Whether something accepts TCP connections at the URL's host and port."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=0.2):
            return True
    except OSError:
        return False


def port_free(host: str, port: int) -> bool:
    """Whether a listener could bind `host:port` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # Servers bind with SO_REUSEADDR (uvicorn does), so connections in TIME_WAIT do not hold the port.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _check_alive(processes: list[ServerProcess], phase: str) -> None:
    if (dead := dead_process(processes)) is not None:
        raise exited(dead, phase)


async def _poll(processes: list[ServerProcess], phase: str, deadline: float,
                still_pending: Callable[[list[ServerProcess]], Awaitable[list[ServerProcess]]], failure: str) -> None:
    """Until `still_pending` returns none of the processes with a URL; a dead process or the deadline fails
    the phase (`failure` is the cause, its detail says which processes never got there)."""
    end = time.monotonic() + deadline
    pending = [p for p in processes if p.url]
    while pending:
        _check_alive(processes, phase)
        pending = await still_pending(pending)
        if not pending:
            return
        if time.monotonic() > end:
            names = ", ".join(p.name for p in pending)
            raise RoundFailure(f"{phase}_timeout", phase, f"{names}{failure} within {deadline:.0f}s")
        await asyncio.sleep(POLL_S)


async def wait_ports(processes: list[ServerProcess], deadline: float) -> None:
    """Start phase: every process's HTTP port accepts connections."""
    async def closed(pending: list[ServerProcess]) -> list[ServerProcess]:
        return [p for p in pending if not port_open(p.url)]
    await _poll(processes, "start", deadline, closed, " did not open its port")


async def _status(client: httpx.AsyncClient, url: str) -> int:
    try:
        return (await client.get(url)).status_code
    except httpx.HTTPError:
        return 0


async def wait_healthy(client: httpx.AsyncClient, processes: list[ServerProcess], deadline: float,
                       path: str = "/health") -> None:
    """Health phase: `path` answers 200 on every process (SGLang answers 503 until its warm-up is done)."""
    async def unhealthy(pending: list[ServerProcess]) -> list[ServerProcess]:
        codes = await asyncio.gather(*(_status(client, p.url + path) for p in pending))
        return [p for p, code in zip(pending, codes, strict=True) if code != 200]
    await _poll(processes, "health", deadline, unhealthy, f": {path} did not answer 200")


async def metadata(client: httpx.AsyncClient, url: str, name: str) -> dict[str, Any]:
    """`/<name>` JSON, or the deprecated `/get_<name>` when the server answers 404 (older versions)."""
    for path in (f"/{name}", f"/get_{name}"):
        try:
            response = await client.get(url + path)
        except httpx.HTTPError as exc:
            raise RoundFailure("health_timeout", "health", f"{url}{path} did not answer: {exc}") from None
        if response.status_code == 404:
            continue
        if response.status_code == 200:
            try:
                data = response.json()
            except ValueError:
                raise RoundFailure("health_timeout", "health", f"{url}{path} returned malformed JSON") from None
            return data if isinstance(data, dict) else {}
        raise RoundFailure("health_timeout", "health", f"{url}{path} answered {response.status_code}")
    raise RoundFailure("health_timeout", "health", f"{url} serves neither /{name} nor /get_{name}")


async def wait_router(client: httpx.AsyncClient, router: ServerProcess, everything: list[ServerProcess],
                      workers: int, deadline: float) -> None:
    """The router answers `/readiness` with every worker healthy."""
    end = time.monotonic() + deadline
    while True:
        _check_alive(everything, "health")
        try:
            response = await client.get(router.url + "/readiness")
            body = response.json() if response.status_code == 200 else {}
        except (httpx.HTTPError, ValueError):
            body = {}
        if int(body.get("healthy_workers", 0) or 0) >= workers:
            return
        if time.monotonic() > end:
            raise RoundFailure("health_timeout", "health",
                               f"the router did not report {workers} healthy worker(s) within {deadline:.0f}s")
        await asyncio.sleep(POLL_S)
