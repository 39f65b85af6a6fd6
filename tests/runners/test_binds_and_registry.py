"""Safe by default: listeners on loopback unless the scenario names its cluster, wildcard binds only on opt-in;
a busy port named with its holder; the process registry written before each launch and never killing a
process that merely reuses a recorded PID."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from plugins.runners.local import LocalRunner, RoundFailure, RoundRegistry, ServerProcess, end_orphans
from plugins.runners.local.binds import bind_warnings
from plugins.runners.local.launch import plan_launch
from plugins.runners.local.lifetime import alive, start_time
from plugins.runners.local.ports import port_holder
from plugins.runners.local.registry import Owner
from service.components import RoundContext
from service.domain import RoundResult, RoundStatus, Scenario, WorkerGroup
from service.scenario import load_scenario
from service.settings import load_runner_settings

from .conftest import EXAMPLES, RecordingLauncher, settings, single_worker


def _with_router(host: str, extra: dict[str, Any] | None = None, node_hosts: list[str] | None = None) -> Scenario:
    base = load_scenario(EXAMPLES / "two-workers-round-robin.toml")
    router = msgspec.structs.replace(base.deployment.router, host=host, extra=extra or {})
    hardware = msgspec.structs.replace(base.hardware, node_hosts=node_hosts or [])
    return msgspec.structs.replace(base, hardware=hardware,
                                   deployment=msgspec.structs.replace(base.deployment, router=router))


def _run(scenario: Scenario, launcher: RecordingLauncher, tmp_path: Path, **overrides: Any) -> RoundResult:
    context = RoundContext(cost_model="roofline", settings=settings(state_dir=str(tmp_path / "state"), **overrides))
    return asyncio.run(LocalRunner(launcher=launcher).run_round(scenario, context=context))


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_wildcard_router_host_is_refused_naming_the_field_and_the_fix(host: str, launcher: RecordingLauncher,
                                                                       tmp_path: Path) -> None:
    result = _run(_with_router(host), launcher, tmp_path)
    assert result.status is RoundStatus.FAILED and result.error_phase == "validate"
    assert result.error is not None and result.error.startswith("validation: deployment.router.host = ")
    assert "127.0.0.1" in result.error and "allow_wildcard_bind" in result.error
    assert launcher.processes == []


def test_a_wildcard_bind_allowed_by_the_operator_carries_a_warning() -> None:
    allowed = load_runner_settings({"allow_wildcard_bind": True}, environ={})
    warnings = bind_warnings(_with_router("0.0.0.0"), allowed)
    assert len(warnings) == 1 and warnings[0].startswith("warning: deployment.router.host = '0.0.0.0' listens on "
                                                         "every interface")
    opted = load_runner_settings(environ={"SGLANG_TUNER_RUNNER_ALLOW_WILDCARD_BIND": "1"})
    assert opted.allow_wildcard_bind


def test_the_routers_metrics_stay_on_loopback_unless_named(launcher: RecordingLauncher, tmp_path: Path) -> None:
    with pytest.raises(RoundFailure, match=r'deployment.router.extra\["--prometheus-host"\]'):
        bind_warnings(_with_router("127.0.0.1", {"--prometheus-host": "0.0.0.0"}), load_runner_settings(environ={}))
    _, specs = plan_launch(_with_router("127.0.0.1", {}), load_runner_settings({"engine": "emulator"}, environ={}))
    router = specs[-1].argv
    assert router[router.index("--prometheus-host") + 1] == "127.0.0.1"  # sglang-router's own default is 0.0.0.0


def test_a_router_host_outside_the_cluster_is_refused_and_a_node_host_accepted() -> None:
    defaults = load_runner_settings(environ={})
    with pytest.raises(RoundFailure, match=r"deployment.router.host = '192.0.2.7' is neither loopback nor one of "
                                        r"hardware.node_hosts"):
        bind_warnings(_with_router("192.0.2.7"), defaults)
    assert bind_warnings(_with_router("192.0.2.7", node_hosts=["192.0.2.7"]), defaults) == []


@contextlib.contextmanager
def _listener() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield int(held.getsockname()[1])


def test_a_busy_port_fails_the_round_as_port_in_use_naming_the_holder(launcher: RecordingLauncher,
                                                                     tmp_path: Path) -> None:
    base = single_worker()
    with _listener() as port:
        group = msgspec.structs.replace(base.deployment.groups[0], base_port=port)
        scenario = msgspec.structs.replace(base, deployment=msgspec.structs.replace(base.deployment, groups=[group]))
        result = _run(scenario, launcher, tmp_path, remap_ports=False)
    assert result.status is RoundStatus.FAILED and result.error_phase == "start"
    assert result.error is not None and result.error.startswith(f"port_in_use: already in use before launch: "
                                                                f"127.0.0.1:{port} (held by pid {os.getpid()}: ")
    assert "pytest" in result.error and "remap_ports" in result.error
    assert launcher.processes == []


def test_a_port_held_by_a_connections_local_end_names_the_connection_not_an_invisible_listener(
        launcher: RecordingLauncher, tmp_path: Path) -> None:
    # Any outgoing connection may be given a port of the ephemeral range: no listener, yet no server can bind it.
    with socket.create_server(("127.0.0.1", 0)) as peer, socket.socket() as client:
        client.bind(("127.0.0.1", 0))
        port = int(client.getsockname()[1])
        client.connect(peer.getsockname())
        accepted, _ = peer.accept()
        base = single_worker()
        group = msgspec.structs.replace(base.deployment.groups[0], base_port=port)
        scenario = msgspec.structs.replace(base, deployment=msgspec.structs.replace(base.deployment, groups=[group]))
        result = _run(scenario, launcher, tmp_path, remap_ports=False)
        client.close()
        accepted.close()
    assert result.status is RoundStatus.FAILED and result.error is not None and launcher.processes == []
    assert f"127.0.0.1:{port} (not a listener but the local end of a connection (ESTABLISHED; pid {os.getpid()}: " \
        in result.error
    assert "go to outgoing connections, so name ports outside them" in result.error
    # Closed first on this side, the connection lingers in TIME_WAIT, held by no process, and still holds the port.
    assert "local end of a connection (TIME_WAIT)" in port_holder(port)


class CheckingLauncher(RecordingLauncher):
    """Reads the registry at each spawn: the process must already be on record, with its listener."""

    def __init__(self, state: Path) -> None:
        super().__init__()
        self.state = state
        self.on_record: list[list[tuple[str, int, int]]] = []

    def spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> ServerProcess:
        (record,) = [json.loads(path.read_text()) for path in self.state.glob("*.json")]
        self.on_record.append([(p["name"], p["port"], p["pid"]) for p in record["processes"]])
        return super().spawn(name, argv, env, log_path)


def test_each_process_is_on_record_before_it_is_launched_and_in_the_result(tmp_path: Path) -> None:
    launcher = CheckingLauncher(tmp_path / "state")
    result = _run(single_worker(num_prompts=4), launcher, tmp_path)
    assert result.status is RoundStatus.OK, result.error
    (worker,) = result.provenance.processes
    assert launcher.on_record == [[("worker-0", worker.port, 0)]]  # planned, not yet started
    spawned = launcher.processes[0]
    assert (worker.pid, worker.pgid, worker.start_time) == (spawned.popen.pid, spawned.popen.pid, spawned.started)
    assert worker.argv == spawned.argv and list((tmp_path / "state").glob("*.json")) == []


def test_a_recorded_pid_now_held_by_another_process_is_never_killed(tmp_path: Path) -> None:
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        started = start_time(bystander.pid)
        assert started is not None
        # The record's process had this PID once, but started at another time: the PID was reused since.
        registry = RoundRegistry(tmp_path, owner=Owner(pid=2**22 + 1, start_time=1))
        registry.planned("worker-0", "worker", "127.0.0.1", 30000, ["python"])
        registry.started("worker-0", bystander.pid, started - 1)
        assert end_orphans(tmp_path) == []
        assert alive(bystander.pid, started) and list(tmp_path.glob("*.json")) == []
    finally:
        bystander.send_signal(signal.SIGKILL)
        bystander.wait(timeout=5)


def test_a_live_owners_round_is_left_alone(tmp_path: Path) -> None:
    served = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        registry = RoundRegistry(tmp_path)  # owned by this test process, which is alive
        registry.planned("worker-0", "worker", "127.0.0.1", 30000, ["python"])
        registry.started("worker-0", served.pid, start_time(served.pid) or 0)
        assert end_orphans(tmp_path) == []
        assert served.poll() is None
        assert [path.name for path in tmp_path.glob("*.json")] == [registry.path.name]
        registry.close()
    finally:
        served.send_signal(signal.SIGKILL)
        served.wait(timeout=5)


def test_a_held_pd_bootstrap_port_is_port_in_use_too(launcher: RecordingLauncher, tmp_path: Path) -> None:
    base = _with_router("127.0.0.1")
    server = base.deployment.groups[0].server
    with _listener() as bootstrap, _listener() as prefill_http, _listener() as decode_http:
        pass  # three ports just freed; only the bootstrap port is held again below
    groups = [WorkerGroup(name="prefill", role="prefill", base_port=prefill_http, bootstrap_port=bootstrap,
                          server=server),
              WorkerGroup(name="decode", role="decode", base_port=decode_http, server=server)]
    scenario = msgspec.structs.replace(base, deployment=msgspec.structs.replace(base.deployment, groups=groups))
    with socket.socket() as held:
        held.bind(("127.0.0.1", bootstrap))
        held.listen()
        result = _run(scenario, launcher, tmp_path, remap_ports=False)
    assert result.error is not None and result.error.startswith(
        f"port_in_use: already in use before launch: 127.0.0.1:{bootstrap} (held by pid {os.getpid()}: "), result.error
    assert launcher.processes == []


def test_a_round_that_cannot_record_its_processes_launches_none(launcher: RecordingLauncher, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    context = RoundContext(cost_model="roofline", settings=settings(state_dir=str(blocker / "processes")))
    result = asyncio.run(LocalRunner(launcher=launcher).run_round(single_worker(), context=context))
    assert result.status is RoundStatus.FAILED and result.error is not None
    assert result.error.startswith(f"validation: the process registry {blocker / 'processes'} is not writable")
    assert "state_dir" in result.error and launcher.processes == []
