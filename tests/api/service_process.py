"""`sglang-tuner serve` as a subprocess on a free loopback port (real uvicorn, SQLite in a temp dir), and its keys."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from service.store import Scope, open_store

CLI = str(Path(sys.executable).parent / "sglang-tuner")


def wait_ready(url: str, seconds: float, poll: float = 0.05, path: str = "/readyz") -> bool:
    """Poll `url` + `path` until it answers 200; False when `seconds` pass first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}{path}", timeout=1).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        time.sleep(poll)
    return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Service:
    """One `sglang-tuner serve` process on a loopback port."""

    def __init__(self, db: Path, port: int, *extra_args: str) -> None:
        self.db, self.port, self.extra_args = db, port, extra_args
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "SGLANG_TUNER_DB": str(self.db)}
        self.process = subprocess.Popen([CLI, "serve", "--port", str(self.port), "--lease-seconds", "2",
                                         *self.extra_args], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_ready(self.url, 30, poll=0.1):
            raise AssertionError("the service did not become ready")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


def create_key(db: Path, scope: str, name: str = "test") -> str:
    """A new API key with `scope`, made by the CLI as an operator would."""
    made = subprocess.run([CLI, "keys", "create", "--name", name, "--scope", scope, "--db", str(db)],
                          capture_output=True, text=True, check=True)
    return made.stdout.strip().splitlines()[0]


def create_keys(db: Path, scopes: list[str]) -> dict[str, str]:
    """One new API key per scope, written straight to the store (faster than one CLI process per key)."""
    async def make() -> dict[str, str]:
        store = open_store(str(db))
        await store.migrate()
        made = {scope: (await store.create_api_key(f"{scope}-key", [Scope(scope)]))[1] for scope in scopes}
        await store.close()
        return made
    return asyncio.run(make())
