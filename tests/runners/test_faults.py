"""Each emulator fault, and a worker killed from outside, fails its round naming the cause within the phase
deadline; no process of the round survives; the next round launches the last accepted argv exactly."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import msgspec
import pytest

from plugins.runners.local import LocalRunner, group_members
from service.components import RoundContext
from service.domain import RoundResult, RoundStatus

from .conftest import RecordingLauncher, settings, single_worker

# (fault, expected cause, phase, the phase deadline that bounds it)
FAULTS = [
    ("oom", "oom", "start", "start"),
    ("cuda_graph", "cuda_graph_capture", "start", "start"),
    ("port_in_use", "port_in_use", "start", "start"),
    ("hang", "start_timeout", "start", "start"),
    ("crash:3", "worker_died", "load", "load"),
    ("dead_scheduler:3", "scheduler_stalled", "load", "stall"),
    # A 600-token pool holds two of the eight 260-token requests: 6 to 9 retractions for 16 requests, well
    # past the bar of 4 (a 900-token pool gave 4 to 6, a storm only on some runs).
    ("retraction_storm:600", "retraction_storm", "load", "load"),
]
SHORT = {"start": 8.0, "stall": 2.0, "load": 30.0}


def _round(runner: LocalRunner, scenario: object = None, **overrides: object) -> tuple[RoundResult, float]:
    started = time.monotonic()
    context = RoundContext(cost_model="roofline", settings=settings(deadlines=SHORT, **overrides))
    result = asyncio.run(runner.run_round(scenario or single_worker(), context=context))  # type: ignore[arg-type]
    return result, time.monotonic() - started


def _assert_no_survivors(launcher: RecordingLauncher) -> None:
    assert launcher.processes
    for process in launcher.processes:
        assert process.popen.poll() is not None
        assert group_members(process.pgid) == [], f"{process.name} left processes behind"


@pytest.mark.parametrize(("fault", "cause", "phase", "deadline"), FAULTS, ids=[f[0] for f in FAULTS])
def test_each_fault_fails_its_round_with_the_cause_named(launcher: RecordingLauncher, fault: str, cause: str,
                                                         phase: str, deadline: str) -> None:
    # A storm is judged per completed request; a short round needs a lower bar than the default of one each.
    storm = fault.startswith("retraction")
    extra = {"retraction_storm_per_request": 0.25} if storm else {}
    # Long outputs on short prompts: admission sees room, decode then outgrows the small pool.
    scenario = single_worker(concurrency=8, input_len=100, output_len=160) if storm else None
    result, elapsed = _round(LocalRunner(launcher=launcher), scenario, emulator_fault=fault, **extra)
    assert result.status is RoundStatus.FAILED
    assert result.error is not None and result.error.startswith(f"{cause}:"), result.error
    assert result.error_phase == phase
    # Only a fault of the configuration itself (memory, graphs) is one a second launch would meet again.
    assert result.config_fault == (cause in ("oom", "cuda_graph_capture"))
    # Within the phase deadline, plus what the round needs before that phase starts (start-up of a worker).
    assert elapsed < SHORT.get(deadline, 30.0) + 15.0
    _assert_no_survivors(launcher)


def test_a_worker_killed_from_outside_fails_the_round(launcher: RecordingLauncher) -> None:
    runner = LocalRunner(launcher=launcher)

    async def kill_when_loaded() -> None:
        while not launcher.processes or "Prefill batch, #new-seq: 1, #new-token: 200" not in \
                launcher.processes[0].log_text():
            await asyncio.sleep(0.05)
        os.kill(launcher.processes[0].popen.pid, signal.SIGKILL)  # the server only, not its group

    async def both() -> RoundResult:
        context = RoundContext(cost_model="roofline", settings=settings(deadlines=SHORT))
        killer = asyncio.create_task(kill_when_loaded())
        result = await runner.run_round(single_worker(num_prompts=40), context=context)
        killer.cancel()
        return result

    result = asyncio.run(both())
    assert result.status is RoundStatus.FAILED
    assert result.error is not None and result.error.startswith("worker_died:")
    assert "killed by signal 9" in result.error
    assert result.error_phase in ("warmup", "load")
    _assert_no_survivors(launcher)  # the emulator's own child died with its process group


def test_after_a_failed_candidate_the_accepted_argv_is_launched_exactly(launcher: RecordingLauncher) -> None:
    runner = LocalRunner(launcher=launcher)
    accepted = single_worker()
    group = accepted.deployment.groups[0]
    candidate_group = msgspec.structs.replace(group, server=msgspec.structs.replace(group.server,
                                                                                    chunked_prefill_size=512))
    candidate = msgspec.structs.replace(accepted, deployment=msgspec.structs.replace(accepted.deployment,
                                                                                     groups=[candidate_group]))
    first, _ = _round(runner, accepted)
    failed, _ = _round(runner, candidate, emulator_fault="crash:2")
    again, _ = _round(runner, accepted)
    assert first.status is RoundStatus.OK and failed.status is RoundStatus.FAILED and again.status is RoundStatus.OK
    assert runner.launches[1] != runner.launches[0]
    assert "--chunked-prefill-size" in runner.launches[1][0]
    assert runner.launches[2] == runner.launches[0]
    _assert_no_survivors(launcher)
