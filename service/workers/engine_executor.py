"""The tuning engine as a `JobExecutor`: each job on an event loop of its own thread, journaled to the store.

The engine writes every round to the journal and waits for the write; here the journal's calls cross from
the job's loop to the service's loop, where the store commits them. A resumed job is the engine's own
`resume` from the committed rounds. A stop reaches the engine through `TuningEngine.stop`.
"""

from __future__ import annotations

import asyncio

from service.domain import Job, JobState, Round, Scenario
from service.engine import JobEvent, RoundJournal, TuningEngine, TuningReport, parts_from_host
from service.playbooks import playbook_scenario
from service.plugin_host import PluginHost
from service.workers.thread_loop import call_back_on, run_on_own_loop


class CrossLoopJournal:
    """A journal of another event loop, awaited from the job's loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, journal: RoundJournal) -> None:
        self._round = call_back_on(loop, journal.record_round)
        self._event = call_back_on(loop, journal.record_event)

    async def record_round(self, round_: Round, /) -> None:
        await self._round(round_)

    async def record_event(self, event: JobEvent, /) -> None:
        await self._event(event)


def build_engine(plugins: PluginHost, job: Job, journal: RoundJournal) -> TuningEngine:
    """The engine for `job` with the host's components, its scenario (or its playbook's) and `journal`."""
    playbook = plugins.get("playbook", job.playbook)
    scenario: Scenario = job.scenario if job.scenario is not None else playbook_scenario(playbook)
    parts = parts_from_host(plugins, playbook, scenario, runner=job.runner, calibrations=job.calibrations)
    return TuningEngine(parts, playbook, scenario, seed=job.seed, repeats=job.repeats, job_id=job.id,
                        journal=journal)


async def run_job(engine: TuningEngine, job: Job) -> TuningReport:
    """Run or resume `job` on `engine` and hand back its report."""
    outcome = await (engine.resume(job.rounds, job.skipped) if job.rounds else engine.run())
    return outcome.report


class EngineExecutor:
    """Runs jobs with the tuning engine and the plugin host's techniques, runner and policy."""

    def __init__(self, plugins: PluginHost) -> None:
        self.plugins = plugins
        self._engines: dict[str, TuningEngine] = {}

    async def run(self, job: Job, journal: RoundJournal) -> TuningReport:
        """Run (or resume) `job` on a thread of its own; the journal is written on this loop."""
        across = CrossLoopJournal(asyncio.get_running_loop(), journal)

        async def in_thread() -> TuningReport:
            engine = build_engine(self.plugins, job, across)
            self._engines[job.id] = engine
            return await run_job(engine, job)

        try:
            return await run_on_own_loop(in_thread, name=job.id)
        finally:
            self._engines.pop(job.id, None)

    def stop(self, job_id: str, state: JobState, reason: str) -> bool:
        """Ask the engine of `job_id` to end as `state`; it journals the ending and returns its report."""
        engine = self._engines.get(job_id)
        if engine is None:
            return False
        engine.stop(state, reason)
        return True
