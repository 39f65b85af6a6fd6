"""Wire types: what clients send and receive (msgspec Structs; OpenAPI is generated from these)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import msgspec

from service.domain import Decision, JobState, Round, RoundState
from service.store import CatchUp, FireRecord, JobRecord, ScheduleRecord
from service.workers.requests import JobRequest

# Text fields are bounded as their database columns are (`service.store.tables`): a longer value is a 400
# naming the field, never a database error.
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class JobCreate(JobRequest, kw_only=True, forbid_unknown_fields=True):
    """Start a tuning job: a playbook applied to a scenario on a runner.

    `runner` defaults to the playbook's runner, else the simulator. `resource` names the runner resource (a
    GPU host) the job holds while it runs; jobs naming the same resource run one at a time. Left out, a
    runner that needs a GPU is itself the resource.
    """

    playbook: Name
    runner: Name | None = None
    resource: Annotated[str, msgspec.Meta(min_length=1, max_length=300)] | None = None


class NextStep(msgspec.Struct, kw_only=True):
    """A request that makes sense now, so a client (or an agent) need not read the docs to go on."""

    rel: str
    method: Literal["GET", "POST"]
    href: str
    title: str


class JobView(msgspec.Struct, kw_only=True):
    """A job as clients see it, with its place in the queue while it waits.

    `links` names every resource of the job; `next` lists the requests that make sense in its current
    state (follow events or cancel while it runs, read the report once it has finished).
    """

    id: str
    kind: str
    playbook: str
    runner: str
    state: JobState
    resource: str | None
    queue_position: int | None
    attempt: int
    cancel_requested: bool
    schedule_id: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    stop_reason: str | None
    links: dict[str, str]
    next: list[NextStep] = msgspec.field(default_factory=list)


class JobList(msgspec.Struct, kw_only=True):
    """A page of jobs, newest first; pass `next_cursor` as `cursor` for the next page."""

    items: list[JobView]
    next_cursor: str | None


class RoundView(msgspec.Struct, kw_only=True):
    """One benchmark round: what it tried, what it measured, what the policy decided.

    `delta` and `results` carry the engine's ConfigDelta and RoundResult records as JSON objects.
    """

    index: int
    technique: str
    state: RoundState
    summary: str
    retry_of: int | None
    # The search line: None on the main line, else the round whose candidate started the branch
    # (docs/tuning.md, "The beam"); `base` is the round whose deployment this round changed.
    line: int | None
    base: int | None
    started_at: datetime | None
    finished_at: datetime | None
    decision: Decision | None
    delta: dict[str, Any] | None
    results: list[dict[str, Any]]


def round_view(round_: Round) -> RoundView:
    return RoundView(
        index=round_.index, technique=round_.technique, state=round_.state,
        summary=round_.delta.summary if round_.delta else "", retry_of=round_.retry_of,
        line=round_.line, base=round_.base, started_at=round_.started_at, finished_at=round_.finished_at, decision=round_.decision,
        delta=msgspec.to_builtins(round_.delta) if round_.delta else None,
        results=[msgspec.to_builtins(result) for result in round_.results])


class ComponentView(msgspec.Struct, kw_only=True):
    """A registered technique, runner, policy or playbook, and the plugin that provides it."""

    name: str
    plugin: str
    version: str
    description: str = ""
    details: dict[str, Any] = msgspec.field(default_factory=dict)


class ScheduleCreate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A cron schedule that starts a tuning job (same body as POST /v1/jobs) at each fire."""

    name: Name
    cron: Name
    job: JobCreate
    timezone: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] = "UTC"
    enabled: bool = True
    misfire_grace_seconds: Annotated[int, msgspec.Meta(ge=1, le=7 * 86400)] = 300
    catch_up: CatchUp = CatchUp.RUN_ONCE


class ScheduleView(msgspec.Struct, kw_only=True):
    """A stored schedule and when it fires next."""

    id: str
    name: str
    cron: str
    timezone: str
    job: dict[str, Any]
    enabled: bool
    misfire_grace_seconds: int
    catch_up: CatchUp
    created_at: datetime
    last_fire_at: datetime | None
    next_fire_at: datetime | None


class FireView(msgspec.Struct, kw_only=True):
    """One fire of a schedule: started a job, coalesced into another fire, or recorded as missed."""

    fire_at: datetime
    outcome: str
    job_id: str | None
    instance: str


class Health(msgspec.Struct, kw_only=True):
    """Liveness or readiness, with the checks behind it."""

    status: Literal["ok", "unavailable"]
    checks: dict[str, bool] = msgspec.field(default_factory=dict)


def at(epoch: float | None) -> datetime | None:
    """A stored epoch time as an aware UTC datetime."""
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


def job_links(job_id: str) -> dict[str, str]:
    """Every resource of a job, by relation name."""
    base = f"/v1/jobs/{job_id}"
    return {"self": base, "rounds": f"{base}/rounds", "report": f"{base}/report", "events": f"{base}/events",
            "cancel": f"{base}/cancel"}


def next_steps(job_id: str, state: JobState) -> list[NextStep]:
    """The requests that make sense for a job in `state`, most useful first."""
    links = job_links(job_id)
    if state.is_terminal():
        return [NextStep(rel="report", method="GET", href=links["report"],
                         title="Read the report: rounds, decisions and the final launch commands"),
                NextStep(rel="rounds", method="GET", href=links["rounds"],
                         title="List every round with the policy's decision")]
    return [NextStep(rel="wait", method="GET", href=f"{links['self']}?wait=30",
                     title="Long-poll: answers as soon as the job's state changes, or after 30 s"),
            NextStep(rel="events", method="GET", href=links["events"],
                     title="Follow progress as Server-Sent Events until the job finishes"),
            NextStep(rel="rounds", method="GET", href=links["rounds"], title="Rounds committed so far"),
            NextStep(rel="cancel", method="POST", href=links["cancel"],
                     title="Cancel (write scope); the last accepted deployment stays in force")]


def job_view(job: JobRecord, queue_position: int | None) -> JobView:
    return JobView(
        id=job.id, kind=job.kind, playbook=job.playbook, runner=job.runner, state=job.state, resource=job.resource,
        queue_position=queue_position, attempt=job.attempt, cancel_requested=job.cancel_requested,
        schedule_id=job.schedule_id, created_at=at(job.created_at) or datetime.now(UTC), started_at=at(job.started_at),
        finished_at=at(job.finished_at), stop_reason=job.stop_reason, links=job_links(job.id),
        next=next_steps(job.id, job.state))


def schedule_view(schedule: ScheduleRecord, next_fire_at: datetime | None) -> ScheduleView:
    return ScheduleView(
        id=schedule.id, name=schedule.name, cron=schedule.cron, timezone=schedule.timezone, job=schedule.job_request,
        enabled=schedule.enabled, misfire_grace_seconds=schedule.misfire_grace_seconds, catch_up=schedule.catch_up,
        created_at=at(schedule.created_at) or datetime.now(UTC), last_fire_at=at(schedule.last_fire_at),
        next_fire_at=next_fire_at)


def fire_view(fire: FireRecord) -> FireView:
    return FireView(fire_at=at(fire.fire_at) or datetime.now(UTC), outcome=fire.outcome.value, job_id=fire.job_id,
                    instance=fire.instance)
