"""Server processes: spawned from argv lists (never a shell) in their own process group, always reaped.

Every process starts with `start_new_session=True`, so it leads a new process group that holds its
children too (SGLang's scheduler and detokenizer processes), and with a parent-death signal (SIGKILL when
the thread that started it dies, even by SIGKILL). Teardown signals the whole group: SIGTERM, a grace
period, then SIGKILL, and only returns once no live member of the group is left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from plugins.runners.local.lifetime import die_with_parent, group_members, start_time


@dataclass
class ServerProcess:
    """One launched process (a worker or the router) and where its output goes."""

    name: str
    argv: list[str]
    log_path: Path
    popen: subprocess.Popen[bytes]
    log_file: IO[bytes] | None = None
    url: str = ""
    kind: str = "worker"
    stopped: bool = False
    exit_code: int | None = field(default=None)
    # Start time of the leader (clock ticks after boot, /proc/<pid>/stat): with the PID, what names it for good.
    started: int = 0

    @property
    def pgid(self) -> int:
        """The process group (the leader is the launched process)."""
        return self.popen.pid

    def poll(self) -> int | None:
        """The exit code once the process has ended (None while it runs)."""
        if self.exit_code is None:
            self.exit_code = self.popen.poll()
        return self.exit_code

    def log_text(self, start: int = 0) -> str:
        """The process's log from byte `start`."""
        try:
            with self.log_path.open("rb") as handle:
                handle.seek(start)
                return handle.read().decode(errors="replace")
        except OSError:
            return ""

    def log_size(self) -> int:
        """Bytes written to the log so far."""
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0


class Launcher(Protocol):
    """Starts one process; the runner's only way to create processes (tests record what it receives)."""

    def spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> ServerProcess:
        """Start `argv` with `env` in a new session that dies with its starter, output to `log_path`."""
        ...


class SubprocessLauncher:
    """Launches with `subprocess.Popen`: argv list, no shell, a new session, stdout+stderr to a log file."""

    def spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> ServerProcess:
        """Start `argv` in a new session with its output in `log_path`."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = log_path.open("wb")
        try:
            popen = subprocess.Popen(list(argv), env=dict(env), stdin=subprocess.DEVNULL, stdout=log_file,
                                     stderr=subprocess.STDOUT, start_new_session=True, shell=False,
                                     preexec_fn=die_with_parent(os.getpid()))
        except OSError:
            log_file.close()
            raise
        except subprocess.SubprocessError as exc:  # the preexec_fn failed in the child
            log_file.close()
            raise OSError(f"{argv[0]}: {exc}") from None
        return ServerProcess(name=name, argv=list(argv), log_path=log_path, popen=popen, log_file=log_file,
                             started=start_time(popen.pid) or 0)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def stop(process: ServerProcess, grace: float) -> list[int]:
    """SIGTERM the process group, SIGKILL after `grace` seconds; returns members that were still alive then.

    Returns once the leader is reaped and no live member of the group remains.
    """
    if process.stopped:
        return []
    pgid = process.pgid
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + max(grace, 0.0)
    while time.monotonic() < deadline:
        process.poll()
        if process.exit_code is not None and not group_members(pgid):
            break
        time.sleep(0.02)
    survivors = group_members(pgid)
    if survivors or process.poll() is None:
        _signal_group(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.popen.wait(timeout=5)
        _wait_group_gone(pgid, 5.0)
    process.poll()
    if process.log_file is not None:
        process.log_file.close()
    process.stopped = True
    return survivors


def _wait_group_gone(pgid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while group_members(pgid) and time.monotonic() < deadline:
        _signal_group(pgid, signal.SIGKILL)
        time.sleep(0.02)


def stop_all(processes: Sequence[ServerProcess], grace: float) -> dict[str, list[int]]:
    """Stop every process (router first: it is last in the list), signalling all groups before waiting."""
    for process in processes:
        if not process.stopped:
            _signal_group(process.pgid, signal.SIGTERM)
    return {process.name: stop(process, grace) for process in reversed(processes)}
