"""Job and round state machines: the only legal moves, so a finished record never changes again."""

from __future__ import annotations

from datetime import UTC, datetime

from service.domain import Job, JobState, Round, RoundState

_JOB_MOVES: dict[JobState, frozenset[JobState]] = {
    JobState.QUEUED: frozenset({JobState.RUNNING, JobState.CANCELLED}),
    JobState.RUNNING: frozenset({JobState.PAUSED, JobState.SUCCEEDED, JobState.SLO_NOT_MET, JobState.FAILED,
                                 JobState.CANCELLED}),
    JobState.PAUSED: frozenset({JobState.RUNNING, JobState.CANCELLED, JobState.FAILED}),
}

_ROUND_MOVES: dict[RoundState, frozenset[RoundState]] = {
    RoundState.PENDING: frozenset({RoundState.RUNNING, RoundState.INTERRUPTED}),
    RoundState.RUNNING: frozenset({RoundState.MEASURED, RoundState.FINISHED, RoundState.FAILED,
                                   RoundState.INTERRUPTED}),
    # A measured alternative waits for its group's decision; a restart keeps its results.
    RoundState.MEASURED: frozenset({RoundState.FINISHED, RoundState.FAILED}),
}


class IllegalTransition(RuntimeError):
    """A state change the machine does not allow (for example, touching a finished round)."""


def now() -> datetime:
    return datetime.now(UTC)


def move_job(job: Job, target: JobState, reason: str | None = None) -> None:
    """Move `job` to `target`, recording when it finished and why."""
    if target not in _JOB_MOVES.get(job.state, frozenset()):
        raise IllegalTransition(f"job {job.id}: {job.state} -> {target} is not allowed")
    job.state = target
    if reason is not None:
        job.stop_reason = reason
    if target.is_terminal():
        job.finished_at = now()


def move_round(round_: Round, target: RoundState) -> None:
    """Move a round forward; finished, failed and interrupted rounds are immutable."""
    if target not in _ROUND_MOVES.get(round_.state, frozenset()):
        raise IllegalTransition(f"round {round_.index}: {round_.state} -> {target} is not allowed")
    round_.state = target
    if target is RoundState.RUNNING:
        round_.started_at = now()
    if target.is_terminal():
        round_.finished_at = now()
