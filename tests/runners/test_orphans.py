"""No orphan, ever: `sglang-tuner round --runner local` killed mid-round leaves no process of the round, and
what a dead owner left behind is ended by the next round, which says so in its notes.

Every round here runs the project's emulator behind the real sglang-router, in a state directory of its
own; whatever a test started is killed in its `finally`, by recorded PID and start time, even on failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from plugins.runners.local import LocalRunner, RoundRegistry, group_members
from plugins.runners.local.lifetime import alive, start_time
from plugins.runners.local.registry import Owner
from service.components import RoundContext
from service.domain import RoundStatus

from .conftest import EXAMPLES, ROOT, settings, single_worker

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sglang_router") is None, reason="sglang-router is not installed")

CLI = [sys.executable, "-c", "from service.cli import main; main()"]
UP_S = 90.0  # workers healthy and the router launched, on a busy two-core machine
GONE_S = 15.0


def _long_scenario(tmp_path: Path) -> Path:
    """Two emulated workers behind the router, with enough requests that the load outlasts the test."""
    text = (EXAMPLES / "two-workers-round-robin.toml").read_text().replace("num_prompts = 96", "num_prompts = 20000")
    path = tmp_path / "long-round.toml"
    path.write_text(text)
    return path


def _records(state: Path) -> list[dict[str, Any]]:
    records = []
    for path in state.glob("*.json"):
        with contextlib.suppress(OSError, ValueError):
            records.append(json.loads(path.read_text()))
    return records


def _running(processes: list[dict[str, Any]]) -> list[int]:
    """What still runs of the recorded processes: each leader still itself, and its group's members."""
    pids: set[int] = set()
    for process in processes:
        if process["pid"]:
            pids.update(group_members(process["pgid"], since=process["start_time"]))
            if alive(process["pid"], process["start_time"]):
                pids.add(process["pid"])
    return sorted(pids)


def _kill_recorded(processes: list[dict[str, Any]]) -> None:
    for process in processes:
        leader = start_time(process["pid"]) if process["pid"] else None
        if leader is not None and leader != process["start_time"]:
            continue  # the PID names another process now: its group is not the round's
        if leader is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process["pgid"], signal.SIGKILL)
        for pid in group_members(process["pgid"], since=process["start_time"]) if process["pid"] else []:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
        return True
    return False


def _wait_until(check: Any, timeout: float, what: str) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if value := check():
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout:.0f}s")


@contextlib.contextmanager
def _cli_round(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path, list[dict[str, Any]]]]:
    """A `round --runner local` subprocess; yields it, its state directory, and (once filled by
    `_wait_up`) its recorded processes, all of which are killed on the way out whatever happened."""
    state = tmp_path / "state"
    env = {**os.environ, "SGLANG_TUNER_RUNNER_ENGINE": "emulator", "SGLANG_TUNER_RUNNER_REMAP_PORTS": "1",
           "SGLANG_TUNER_RUNNER_TIME_SCALE": "0.5", "SGLANG_TUNER_RUNNER_STATE_DIR": str(state),
           "SGLANG_TUNER_RUNNER_LOG_DIR": str(tmp_path / "logs")}
    command = [*CLI, "--log-level", "warning", "round", str(_long_scenario(tmp_path)), "--runner", "local"]
    owner = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    recorded: list[dict[str, Any]] = []
    try:
        yield owner, state, recorded
    finally:
        if owner.poll() is None:
            owner.kill()
        owner.communicate(timeout=30)
        for record in _records(state):
            recorded.extend(record["processes"])
        _kill_recorded(recorded)


def _wait_up(state: Path, recorded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recorded processes once the router is launched (after every worker is healthy) and listening."""
    def up() -> list[dict[str, Any]] | None:
        for record in _records(state):
            router = next((p for p in record["processes"] if p["kind"] == "router" and p["pid"]), None)
            if router is not None and _port_open(router["port"]):
                return list(record["processes"])
        return None
    processes = _wait_until(up, UP_S, "the round's workers and router did not come up")
    recorded.extend(processes)
    return processes


def _assert_children_recorded(processes: list[dict[str, Any]]) -> None:
    """Each emulator keeps a child, as SGLang keeps its scheduler: the groups hold more than the leaders."""
    workers = [p for p in processes if p["kind"] == "worker"]
    assert len(workers) == 2 and len([p for p in processes if p["kind"] == "router"]) == 1
    for worker in workers:
        assert len(group_members(worker["pgid"], since=worker["start_time"])) >= 2, worker["name"]


def test_sigterm_mid_round_tears_the_round_down(tmp_path: Path) -> None:
    with _cli_round(tmp_path) as (owner, state, recorded):
        processes = _wait_up(state, recorded)
        _assert_children_recorded(processes)
        owner.send_signal(signal.SIGTERM)
        _, stderr = owner.communicate(timeout=60)
        assert owner.returncode == 128 + signal.SIGTERM
        assert b"round stopped by SIGTERM" in stderr
        assert _running(processes) == []  # teardown returns only once every group is gone
        assert _records(state) == []  # nothing left to end, so nothing left recorded


def test_sigkill_mid_round_leaves_no_process_of_the_round(tmp_path: Path) -> None:
    with _cli_round(tmp_path) as (owner, state, recorded):
        processes = _wait_up(state, recorded)
        _assert_children_recorded(processes)
        owner.kill()
        owner.wait(timeout=10)
        # No teardown ran: the parent-death signal ends the workers and the router, and theirs their children.
        _wait_until(lambda: _running(processes) == [], GONE_S, f"{_running(processes)} still run after SIGKILL")
        leftover = _records(state)
        assert [p["pid"] for p in leftover[0]["processes"]] == [p["pid"] for p in processes]


def _dead_owner() -> Owner:
    """An owner that has exited: a process started, timed and reaped."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    started = start_time(child.pid)
    child.wait()
    assert started is not None
    return Owner(pid=child.pid, start_time=started, argv="sglang-tuner round (killed)")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_dead_owners_leftover_is_ended_by_the_next_round_and_noted(tmp_path: Path) -> None:
    state, port = tmp_path / "state", _free_port()
    # What an owner killed before the parent-death signal existed left behind: an emulated server holding
    # the port the next round needs, in its own session, with a child of its own.
    argv = [sys.executable, "-m", "service.emulator", "--model-path", "Qwen/Qwen3.6-27B", "--host", "127.0.0.1",
            "--port", str(port)]
    leftover = subprocess.Popen(argv, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    started = start_time(leftover.pid) or 0
    record = {"pid": leftover.pid, "pgid": leftover.pid, "start_time": started}
    try:
        _wait_until(lambda: _port_open(port), UP_S, "the leftover emulator did not open its port")
        registry = RoundRegistry(state, owner=_dead_owner())
        registry.planned("worker-0", "worker", "127.0.0.1", port, argv)
        registry.started("worker-0", leftover.pid, started)
        members = group_members(leftover.pid, since=started)
        assert len(members) >= 2  # the emulator and its child

        base = single_worker(num_prompts=8)
        group = msgspec.structs.replace(base.deployment.groups[0], base_port=port)
        scenario = msgspec.structs.replace(base, deployment=msgspec.structs.replace(base.deployment, groups=[group]))
        context = RoundContext(cost_model="roofline", settings=settings(remap_ports=False, state_dir=str(state)))
        result = asyncio.run(LocalRunner().run_round(scenario, context=context))

        assert result.status is RoundStatus.OK, result.error
        note = next(n for n in result.notes if n.startswith("orphans: ended"))
        assert f"worker-0 (pid {leftover.pid}, {len(members)} process(es) in its group on 127.0.0.1:{port})" in note
        assert "dead owner" in note and "sglang-tuner round (killed)" in note
        assert leftover.wait(timeout=5) == -signal.SIGKILL
        assert group_members(leftover.pid, since=started) == []
        assert [(p.kind, p.port) for p in result.provenance.processes] == [("worker", port)]
        assert result.provenance.processes[0].pid != leftover.pid and _records(state) == []
    finally:
        _kill_recorded([record])
        with contextlib.suppress(subprocess.TimeoutExpired):
            leftover.wait(timeout=5)
