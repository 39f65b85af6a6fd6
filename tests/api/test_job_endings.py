"""Every ending of a real job, decided by the engine and heard by plugins: `on_job_finished` fires once for each.

The jobs run through the durable workers and the store (SQLite) with the real engine, the simulated runner
and the built-in techniques and policy, loaded by a plugin host that also holds a plugin recording the hook.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest

from service import Playbook, hookimpl
from service.domain import JobState, RoundState
from service.plugin_host import PluginHost
from service.scenario import load_scenario
from service.store import NewJob, Store
from service.workers.engine_executor import EngineExecutor
from service.workers.pool import JobWorkers, WorkerSettings

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
FAST = WorkerSettings(slots=2, lease_seconds=5.0, heartbeat_seconds=0.1, poll_seconds=0.02, reap_every_seconds=0.5,
                      stop_grace_seconds=60.0)


class Recorder:
    """A plugin: a small playbook, and every `on_job_finished` it hears."""

    def __init__(self) -> None:
        self.finished: list[tuple[str, str]] = []

    @hookimpl
    def register_playbooks(self, register: Any) -> None:
        register(Playbook(name="endings", techniques=["chunked_prefill"], max_rounds=2, repeats=1))

    @hookimpl
    def on_job_finished(self, job_id: str, state: str) -> None:
        self.finished.append((job_id, state))


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def host(recorder: Recorder) -> PluginHost:
    return PluginHost(plugins=[("recorder", recorder)])


def _scenario(prompts: int = 40, **changes: Any) -> dict[str, Any]:
    scenario = load_scenario(ROOT / "playbooks/scenarios/coding-assistant-round0.toml")
    bench = msgspec.structs.replace(scenario.bench, num_prompts=prompts, warmup_requests=0)
    body: dict[str, Any] = msgspec.to_builtins(msgspec.structs.replace(scenario, bench=bench))
    for path, value in changes.items():
        target = body
        *parents, leaf = path.split(".")
        for key in parents:
            target = target[key]
        target[leaf] = value
    return body


async def _job(store: Store, scenario: dict[str, Any]) -> str:
    job, _ = await store.create_job(NewJob(playbook="endings", runner="simulated", request={"scenario": scenario}))
    return job.id


async def _until(predicate: Any, timeout: float = 120.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition never became true"
        await asyncio.sleep(0.05)


async def _ended(store: Store, job_id: str) -> JobState:
    await _until(lambda: _is_terminal(store, job_id))
    job = await store.get_job(job_id)
    assert job is not None
    return job.state


async def _is_terminal(store: Store, job_id: str) -> bool:
    job = await store.get_job(job_id)
    return job is not None and job.state.is_terminal()


async def _running_round(store: Store, job_id: str) -> bool:
    return any(r.state is RoundState.RUNNING for r in await store.list_rounds(job_id))


async def test_each_ending_is_decided_by_the_engine_and_heard_once(store: Store, host: PluginHost,
                                                                   recorder: Recorder) -> None:
    workers = JobWorkers(store, EngineExecutor(host), settings=FAST)
    await workers.start()
    try:
        met = await _job(store, _scenario())
        missed = await _job(store, _scenario(**{"slo.min_output_throughput": 1e9}))
        unmeasurable = await _job(store, _scenario(model="no-such-model"))
        endings = {job_id: await _ended(store, job_id) for job_id in (met, missed, unmeasurable)}
    finally:
        await workers.stop()
    assert endings == {met: JobState.SUCCEEDED, missed: JobState.SLO_NOT_MET, unmeasurable: JobState.FAILED}
    assert sorted(recorder.finished) == sorted([(met, "succeeded"), (missed, "slo_not_met"),
                                                (unmeasurable, "failed")])
    report = (await store.get_job(missed)).report
    assert report["job"]["state"] == "slo_not_met" and "does NOT meet its SLO" in report["headline"][1]
    assert any("GPUs" in line for line in report["capacity"])  # the capacity that would meet the target
    failed = (await store.get_job(unmeasurable)).report
    # A model no server could load is refused before launch, as at the doors: nothing is run four times.
    assert failed["final"] is None
    assert failed["job"]["stop_reason"].startswith("the starting deployment cannot launch: model: unknown model "
                                                   "'no-such-model'")
    assert not (await store.list_rounds(unmeasurable))[0].results


async def test_a_cancelled_job_ends_cancelled_through_the_engine(store: Store, host: PluginHost,
                                                                  recorder: Recorder) -> None:
    workers = JobWorkers(store, EngineExecutor(host), settings=FAST)
    await workers.start()
    try:
        job_id = await _job(store, _scenario(prompts=400))
        await _until(lambda: _running_round(store, job_id))
        await store.request_cancel(job_id)
        await workers.request_cancel(job_id)
        state = await _ended(store, job_id)
    finally:
        await workers.stop()
    assert state is JobState.CANCELLED and recorder.finished == [(job_id, "cancelled")]
    report = (await store.get_job(job_id)).report
    assert report["job"]["state"] == "cancelled" and report["job"]["stop_reason"] == "cancelled by a user"


async def test_a_service_stop_pauses_the_job_and_the_next_start_finishes_it(store: Store, host: PluginHost,
                                                                           recorder: Recorder) -> None:
    workers = JobWorkers(store, EngineExecutor(host), settings=FAST)
    await workers.start()
    job_id = await _job(store, _scenario(prompts=400))
    await _until(lambda: _running_round(store, job_id))
    await workers.stop()
    paused = await store.get_job(job_id)
    assert paused is not None and paused.state is JobState.QUEUED  # handed back, to resume on the next start
    assert recorder.finished == [(job_id, "paused")]
    again = JobWorkers(store, EngineExecutor(host), settings=FAST)
    await again.start()
    try:
        state = await _ended(store, job_id)
    finally:
        await again.stop()
    assert state is JobState.SUCCEEDED and recorder.finished == [(job_id, "paused"), (job_id, "succeeded")]
