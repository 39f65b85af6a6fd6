"""The contract between the durable workers and the tuning engine.

The engine satisfies `JobExecutor` structurally (it need not import this module): `run(job, on_round)`
runs a tuning job and returns its outcome. Durability rests on two promises:

- `on_round(round)` is awaited when a round starts and again when it finishes; it returns only after the
  round is committed, so every round is stored before the next one starts.
- `job.rounds` holds the rounds committed by earlier attempts. A resumed job continues after them; a round
  recorded as `interrupted` (its worker died mid-round) is re-run as a new round with `retry_of` set.

Cancelling the job cancels the `run` task: the executor sees `asyncio.CancelledError` at its current await,
and should restore the last accepted deployment before letting it propagate.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Protocol

import msgspec

from service.domain import Job, JobState, Round, Scenario
from service.store import JobRecord


class RoundSink(Protocol):
    """Commits one round (started or finished) before returning."""

    async def __call__(self, round_: Round, /) -> None: ...


class JobExecutor(Protocol):
    """Runs one tuning job; the tuning engine provides the real one."""

    async def run(self, job: Job, on_round: RoundSink) -> Any:
        """Run `job` to its end and return a `JobOutcome` (or a `Job` in a terminal state)."""
        ...


class JobOutcome(msgspec.Struct, kw_only=True):
    """How a job ended: a terminal state, the reason in one sentence, and the report to keep."""

    state: JobState
    stop_reason: str
    report: Any = None


def outcome_of(final: Any) -> JobOutcome:
    """Normalise what an executor returned: a `JobOutcome`, a terminal `Job`, or a mapping with `state`."""
    if isinstance(final, JobOutcome):
        return final
    if isinstance(final, Job):
        report = getattr(final, "report", None)
        return JobOutcome(state=final.state, stop_reason=final.stop_reason or "finished", report=report)
    if isinstance(final, dict) and "state" in final:
        return JobOutcome(state=JobState(final["state"]), stop_reason=str(final.get("stop_reason", "finished")),
                          report=final.get("report"))
    return JobOutcome(state=JobState.SUCCEEDED, stop_reason="finished", report=_plain(final))


def to_domain_job(record: JobRecord, rounds: list[Round]) -> Job:
    """The domain `Job` an executor runs: the request's scenario decoded, committed rounds attached."""
    raw_scenario = record.request.get("scenario")
    scenario = msgspec.convert(raw_scenario, Scenario) if isinstance(raw_scenario, dict) else raw_scenario
    return Job(id=record.id, playbook=record.playbook, runner=record.runner, state=JobState.RUNNING,
               scenario=scenario, rounds=rounds, created_at=datetime.fromtimestamp(record.created_at, UTC),
               kind="round" if record.kind == "round" else "tune")


def _plain(value: Any) -> Any:
    try:
        return msgspec.to_builtins(value)
    except TypeError:
        return repr(value)

