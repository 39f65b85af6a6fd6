"""Ray actors of a round: each one owns one process (a worker or the router) on the node Ray placed it on.

The actor starts its process from an argv list in a new session, with a parent-death signal tied to the
actor (sync actors run their methods on the process's main thread), so the process dies with the actor:
`ray.kill`, a crashed actor, or a lost node all end it. `stop` signals the whole process group first, as
the `local` runner's teardown does. The measurement task runs beside the router and drives the load.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import ray

from plugins.runners.local.failures import cause_from_log, exited, log_excerpt
from plugins.runners.local.ports import free_block
from plugins.runners.local.processes import ServerProcess, SubprocessLauncher, stop
from plugins.runners.local.readiness import port_free, port_open

POLL_S = 0.1


@ray.remote(num_cpus=0, max_restarts=0)
class ProcessActor:
    """One server process on this actor's node."""

    def __init__(self, name: str, kind: str) -> None:
        self.name, self.kind = name, kind
        self.process: ServerProcess | None = None

    def info(self) -> dict[str, Any]:
        """Where this actor runs: node id and address, the GPU ids Ray gave it, and its pid."""
        context = ray.get_runtime_context()
        return {"node_id": context.get_node_id(), "node_ip": ray.util.get_node_ip_address(),
                "gpus": [str(gpu) for gpu in ray.get_gpu_ids()], "pid": os.getpid()}

    def free_ports(self, count: int, avoid: list[int]) -> list[int]:
        """`count` listener ports free on this node's address, none of them in `avoid`."""
        host = ray.util.get_node_ip_address()
        ports: list[int] = []
        taken = set(avoid)
        while len(ports) < count:
            port = free_block(1, avoid=frozenset(taken))
            if port_free(host, port):
                ports.append(port)
            taken.add(port)
        return ports

    def start(self, argv: list[str], env: dict[str, str], log_dir: str) -> dict[str, Any]:
        """Spawn the process (argv list, never a shell); its pid, process group, start time and log path."""
        folder = Path(log_dir or tempfile.mkdtemp(prefix="sglang-tuner-ray-"))
        environ = {**os.environ, **env}
        gpus = [str(gpu) for gpu in ray.get_gpu_ids()]
        if gpus:
            environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        self.process = SubprocessLauncher().spawn(self.name, argv, environ, folder / f"{self.name}.log")
        self.process.kind = self.kind
        return {"pid": self.process.popen.pid, "pgid": self.process.pgid, "start_time": self.process.started,
                "log": str(self.process.log_path)}

    def _failure(self, phase: str) -> dict[str, Any] | None:
        if self.process is None or self.process.poll() is None:
            return None
        failure = exited(self.process, phase)
        return {"cause": failure.cause, "phase": failure.phase, "message": failure.message}

    def wait_ready(self, url: str, path: str, deadline: float, workers: int = 0) -> dict[str, Any] | None:
        """Until the port accepts and `path` answers 200 (the router: until `/readiness` counts `workers`).

        Returns None when ready, else the failure (`cause`, `phase`, `message`).
        """
        end = time.monotonic() + deadline
        phase = "start"
        with httpx.Client(timeout=5.0) as client:
            while time.monotonic() < end:
                if (failure := self._failure(phase)) is not None:
                    return failure
                if not url:
                    return None  # a multi-node server's rank above 0 serves no HTTP the runner reads
                if phase == "start" and port_open(url):
                    phase = "health"
                if phase == "health" and self._answers(client, url + path, workers):
                    return None
                time.sleep(POLL_S)
        what = "did not open its port" if phase == "start" else f": {path} did not answer 200"
        return {"cause": f"{phase}_timeout", "phase": phase, "message": f"{self.name} {what} within {deadline:.0f}s"}

    @staticmethod
    def _answers(client: httpx.Client, url: str, workers: int) -> bool:
        try:
            response = client.get(url)
        except httpx.HTTPError:
            return False
        if response.status_code != 200:
            return False
        if not workers:
            return True
        try:
            return int(response.json().get("healthy_workers", 0) or 0) >= workers
        except (ValueError, AttributeError):
            return False

    def poll(self, phase: str = "load") -> dict[str, Any] | None:
        """None while the process runs, else why it ended during `phase` (named from its log)."""
        return self._failure(phase)

    def log_size(self) -> int:
        """Bytes of log written so far."""
        return self.process.log_size() if self.process is not None else 0

    def log_text(self, start: int = 0) -> str:
        """The log from byte `start`."""
        return self.process.log_text(start) if self.process is not None else ""

    def log_cause(self) -> str | None:
        """The failure the log names, if any (a watchdog line, an OOM)."""
        return cause_from_log(self.log_text())

    def log_tail(self) -> str:
        """The log's last lines, for an error message."""
        return log_excerpt(self.log_text(), None)

    def stop(self, grace: float) -> list[int]:
        """SIGTERM the process group, SIGKILL after `grace`; returns the members still alive at the SIGKILL."""
        return stop(self.process, grace) if self.process is not None else []


@ray.remote(num_cpus=0, max_retries=0)
def measure_task(request: dict[str, Any], workers: list[Any]) -> dict[str, Any]:
    """The round's load, run beside the router: see `plugins.runners.ray.measure.measure`."""
    import asyncio

    from plugins.runners.ray.measure import measure

    return asyncio.run(measure(request, workers))
