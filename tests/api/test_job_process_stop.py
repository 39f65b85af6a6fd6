"""A stop sent to a job process the moment it exists ends the job as asked, never by the signal's default action.

The child installs its stop-signal handlers a few milliseconds after the fork (longer on a loaded machine,
where it runs idle-class); a cancel that arrives in between used to kill it, and the job ended `failed` with
"the job process exited without a result" instead of `cancelled`.
"""

from __future__ import annotations

import asyncio

import pytest

from service.domain import Job, JobState, Round
from service.engine import JobEvent
from service.plugin_host import PluginHost
from service.workers.engine_process import ProcessEngineExecutor

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


class _Journal:
    def __init__(self) -> None:
        self.rounds: list[Round] = []
        self.events: list[JobEvent] = []

    async def record_round(self, round_: Round, /) -> None:
        self.rounds.append(round_)

    async def record_event(self, event: JobEvent, /) -> None:
        self.events.append(event)


@pytest.mark.parametrize("state", [JobState.CANCELLED, JobState.PAUSED])
async def test_a_stop_sent_as_the_child_is_forked_ends_the_job_as_asked(state: JobState) -> None:
    executor = ProcessEngineExecutor(PluginHost(), serving_cpus=0)
    job = Job(id=f"stop-at-fork-{state.value}", playbook="moe-at-scale", runner="simulated")
    run = asyncio.ensure_future(executor.run(job, _Journal()))
    stopped = False
    async with asyncio.timeout(60):
        while not stopped:  # the first moment the executor knows the child: before it can have said "ready"
            if job.id in executor._children:
                stopped = executor.stop(job.id, state, "asked at once")
            await asyncio.sleep(0)
        report = await run
    assert report.job.state == state.value, report.job
    assert report.job.stop_reason, report.job
