"""The contract between the durable workers and whatever runs a job (the tuning engine, or a fake in tests).

`run(job, journal)` runs a job to its ending and returns its `TuningReport`, whose `job.state` is the
ending the engine decided. Durability rests on the journal: every round is written to it (and committed)
before the next step, and `job.rounds` holds what earlier attempts wrote, so a resumed job continues after
them. `stop(job_id, state, reason)` asks a running job to end as `state` (cancelled, or paused for a
restart); it returns False when the executor does not run that job, and the workers then cancel the task.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Protocol

import msgspec

from service.domain import Job, JobState, Round, Scenario, SkippedStep
from service.engine import JobEvent, RoundJournal, TuningReport
from service.store import EventRecord, JobRecord, Store

# What a skip reason on a branch starts with (`service.engine.state.branch_prefix`).
_BRANCH_PREFIX = re.compile(r"^on the branch from round (\d+): ")
# Job events the store writes itself (`finish_job`, `release_job`): the journal does not write them twice.
_STORE_WRITES = frozenset({"job_started", "job_finished", "round_started", "round_finished", "round_measured"})


class JobExecutor(Protocol):
    """Runs one tuning job; the tuning engine provides the real one."""

    async def run(self, job: Job, journal: RoundJournal) -> TuningReport:
        """Run (or resume) `job` to its ending and return its report."""
        ...

    def stop(self, job_id: str, state: JobState, reason: str) -> bool:
        """Ask the running `job_id` to end as `state`; False if this executor does not run it."""
        ...


class StoreJournal:
    """The service's journal: each entry is committed under the job's lease before the engine goes on."""

    def __init__(self, store: Store, job_id: str, owner: str, *, on_round: Any = None) -> None:
        self.store = store
        self.job_id = job_id
        self.owner = owner
        self._on_round = on_round

    async def record_round(self, round_: Round, /) -> None:
        await self.store.record_round(self.job_id, self.owner, round_)
        if self._on_round is not None:
            self._on_round(round_)

    async def record_event(self, event: JobEvent, /) -> None:
        if event.kind in _STORE_WRITES:
            return
        body: dict[str, Any] = {"message": event.message}
        if event.technique is not None:
            body["technique"] = event.technique
        if event.round_index is not None:
            body["round"] = event.round_index
        if event.line is not None:
            body["line"] = event.line
        await self.store.record_event(self.job_id, self.owner, event.kind, body)


def skipped_steps(events: list[EventRecord]) -> list[SkippedStep]:
    """The steps a job's journal recorded as skipped (its `step_skipped` events), in order; a skip recorded
    again word for word (a job resumed before skips were kept judged its skipped steps again) once.

    An event journaled before skips carried their line names a branch only in its reason's prefix.
    """
    found: list[SkippedStep] = []
    for event in events:
        if event.kind != "step_skipped":
            continue
        reason = str(event.body.get("message", ""))
        line = event.body.get("line")
        if line is None and (branch := _BRANCH_PREFIX.match(reason)):
            line = int(branch.group(1))
        step = SkippedStep(technique=str(event.body.get("technique", "")), reason=reason, line=line)
        if step not in found:
            found.append(step)
    return found


def to_domain_job(record: JobRecord, rounds: list[Round], skipped: list[SkippedStep] | None = None) -> Job:
    """The domain `Job` an executor runs: the request's scenario decoded, committed rounds and the steps
    recorded as skipped attached."""
    raw_scenario = record.request.get("scenario")
    scenario = None if raw_scenario is None else msgspec.convert(raw_scenario, Scenario)
    return Job(id=record.id, playbook=record.playbook, runner=record.runner, state=JobState.RUNNING,
               scenario=scenario, rounds=rounds, created_at=datetime.fromtimestamp(record.created_at, UTC),
               kind="round" if record.kind == "round" else "tune", seed=int(record.request.get("seed") or 0),
               repeats=record.request.get("repeats"), skipped=list(skipped or []))
