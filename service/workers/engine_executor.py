"""The tuning engine as a `JobExecutor`: commits each round before the next starts, resumes after a restart.

The engine reports progress through a synchronous callback and keeps its rounds in memory. This adapter
snapshots every round the callback names and commits the snapshots, in order, before the runner starts
the next measurement (and once more when the job ends), so no round begins before its predecessor is
stored. A resumed job gets its committed rounds back: kept deltas are re-applied, tried deltas are not
proposed again, and an interrupted round is re-run as a new round pointing at it (`retry_of`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from service.components import RoundContext, Runner
from service.domain import Job, JobState, Round, RoundResult, RoundState, Scenario
from service.engine import EngineParts, JobEvent, TuningEngine, apply_delta, delta_key, parts_from_host, report_json
from service.playbooks import playbook_scenario
from service.plugin_host import PluginHost
from service.workers.executor import JobOutcome, RoundSink
from service.workers.thread_loop import call_back_on, run_on_own_loop


class RoundCommits:
    """Round snapshots waiting to be committed, in the order they happened."""

    def __init__(self, on_round: RoundSink, history: list[Round]) -> None:
        self.on_round = on_round
        self.engine: TuningEngine | None = None
        self._pending: list[Round] = []
        self._committed = {r.index for r in history}
        # An interrupted round is re-run as a new round; remember which delta each one was trying.
        self._interrupted = {_round_key(r): r.index for r in history if r.state == RoundState.INTERRUPTED}

    def on_event(self, event: JobEvent) -> None:
        """The engine's callback: snapshot the round an event is about."""
        if self.engine is None or event.round_index is None or event.kind not in ("round_started", "round_finished"):
            return
        round_ = self.engine.job.rounds[event.round_index]
        if round_.index not in self._committed and round_.retry_of is None:
            retry_of = self._interrupted.pop(_round_key(round_), None)
            if retry_of is not None:
                round_.retry_of = retry_of
        self._committed.add(round_.index)
        self._pending.append(msgspec.structs.replace(round_))

    async def flush(self) -> None:
        """Commit every pending snapshot, oldest first."""
        while self._pending:
            await self.on_round(self._pending.pop(0))


class CommittingRunner(Runner):
    """Wraps the job's runner: commits pending rounds before each measurement starts."""

    name = "committing"

    def __init__(self, inner: Runner, commits: RoundCommits) -> None:
        self.inner = inner
        self.commits = commits
        self.name = inner.name  # type: ignore[misc] - reports as the runner it wraps
        self.capabilities = inner.capabilities  # type: ignore[misc]

    async def run_round(self, scenario: Scenario, *, seed: int | None = None,
                        context: RoundContext | None = None) -> RoundResult:
        await self.commits.flush()
        return await self.inner.run_round(scenario, seed=seed, context=context)


class ResumingEngine(TuningEngine):
    """A `TuningEngine` that can continue after the rounds an earlier attempt committed."""

    _resumed_baseline = False

    def restore(self, history: list[Round]) -> None:
        """Rebuild the accepted deployment, baseline, tried deltas and budget from committed rounds."""
        self.job.rounds = list(history)
        for round_ in history:
            if round_.state == RoundState.INTERRUPTED:
                continue
            if round_.delta is not None:
                self.state.tried.add(delta_key(round_.delta))
                if round_.results:
                    self.budget.count_round()
            if round_.results:
                self.budget.charge(round_.results, self.state.accepted.deployment.total_gpus())
            if round_.decision is None or not round_.decision.verdict.keeps_candidate():
                continue
            if round_.technique == "baseline":
                self._resumed_baseline = True
            elif round_.delta is not None:
                self.state.accepted = apply_delta(self.state.accepted, round_.delta)
                self.state.kept.append(round_.technique)
            self.state.baseline = round_.results

    async def _measure_baseline(self) -> bool:
        if self._resumed_baseline:
            return True
        return await super()._measure_baseline()


class EngineExecutor:
    """Runs jobs with the tuning engine and the plugin host's techniques, runner and policy."""

    def __init__(self, plugins: PluginHost) -> None:
        self.plugins = plugins

    async def run(self, job: Job, on_round: RoundSink) -> JobOutcome:
        """Run (or resume) `job` on a thread of its own; rounds are committed through `on_round` on this loop."""
        across = call_back_on(asyncio.get_running_loop(), on_round)
        return await run_on_own_loop(lambda: self._run(job, across), name=job.id)

    async def _run(self, job: Job, on_round: RoundSink) -> JobOutcome:
        playbook = self.plugins.get("playbook", job.playbook)
        scenario = job.scenario if isinstance(job.scenario, Scenario) else playbook_scenario(playbook)
        parts = parts_from_host(self.plugins, playbook, scenario, runner=job.runner)
        commits = RoundCommits(on_round, job.rounds)
        committing = EngineParts(techniques=parts.techniques, runner=CommittingRunner(parts.runner, commits),
                                 policy=parts.policy, round_context=parts.round_context, hook=parts.hook,
                                 resolve=parts.resolve)
        engine = ResumingEngine(committing, playbook, scenario, callback=commits.on_event, job_id=job.id)
        commits.engine = engine
        engine.restore(job.rounds)
        outcome = await engine.run()
        await commits.flush()
        report: dict[str, Any] = report_json(outcome)
        if outcome.job.state == JobState.PAUSED:
            # A paused job needs a person (its measurements keep failing); the service records it as failed.
            return JobOutcome(state=JobState.FAILED, stop_reason=outcome.job.stop_reason or "paused", report=report)
        return JobOutcome(state=outcome.job.state, stop_reason=outcome.job.stop_reason or "finished", report=report)


def _round_key(round_: Round) -> str:
    return delta_key(round_.delta) if round_.delta is not None else f"technique:{round_.technique}"
