"""Schedules: cron re-tuning (admin scope to change, read scope to look)."""

from __future__ import annotations

from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec
from litestar import Response, Router, delete, get, post
from litestar.params import JSONBody, PathParameter

from service.api.auth import SECURITY
from service.api.problems import Problem, not_found, problem_responses
from service.api.routes.deps import Runtime
from service.api.wire import FireView, ScheduleCreate, ScheduleView, fire_view, schedule_view
from service.scheduler import CronError, cron_trigger, next_fire_time
from service.store import NewSchedule, ScheduleRecord
from service.workers.requests import JobRequestError, check_job_request

_READ, _ADMIN = {"scope": "read"}, {"scope": "admin"}
_HINT = "GET /v1/schedules lists the schedules"
ScheduleId = Annotated[str, PathParameter(description="Schedule id.", max_length=64)]


def _view(schedule: ScheduleRecord) -> ScheduleView:
    upcoming = None
    if schedule.enabled:
        upcoming = next_fire_time(cron_trigger(schedule.cron, schedule.timezone))
    return schedule_view(schedule, upcoming)


async def _schedule_or_404(runtime: Runtime, schedule_id: str) -> ScheduleRecord:
    schedule = await runtime.store.get_schedule(schedule_id)
    if schedule is None:
        raise not_found("schedule", schedule_id, _HINT)
    return schedule


def _check_timezone(name: str) -> None:
    # Checked apart from the cron so the error names the field at fault; ZoneInfo reads a file named by the
    # key, so an overlong or path-like name fails with OSError or ValueError, not only "not found".
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise Problem(422, "invalid-timezone", "Invalid schedule", f"unknown timezone {name!r}", field="timezone",
                      hint="an IANA name such as 'UTC' or 'Europe/Paris'") from exc


@post("/", operation_id="createSchedule", opt=_ADMIN, security=SECURITY,
      responses=problem_responses(400, 401, 403, 409, 413, 415, 422))
async def create_schedule(data: JSONBody[ScheduleCreate], runtime: Runtime) -> Response[ScheduleView]:
    """Store a cron schedule; each fire queues one job with the given body."""
    _check_timezone(data.timezone)
    try:
        cron_trigger(data.cron, data.timezone)
    except CronError as exc:
        raise Problem(422, "invalid-cron", "Invalid schedule", str(exc), field="cron",
                      hint="five fields 'minute hour day month weekday', e.g. '0 3 * * *' for 03:00 daily") from exc
    try:
        check_job_request(data.job, runtime.plugins)
    except JobRequestError as exc:
        raise Problem(422, "invalid-job", "Invalid job request", exc.detail, field=f"job.{exc.field}",
                      hint=exc.hint) from exc
    schedule = await runtime.store.create_schedule(NewSchedule(
        name=data.name, cron=data.cron, timezone=data.timezone, job_request=msgspec.to_builtins(data.job),
        enabled=data.enabled, misfire_grace_seconds=data.misfire_grace_seconds, catch_up=data.catch_up))
    if runtime.scheduler is not None:
        runtime.scheduler.add(schedule)
    return Response(_view(schedule), status_code=201, headers={"Location": f"/v1/schedules/{schedule.id}"})


@get("/", operation_id="listSchedules", opt=_READ, security=SECURITY, responses=problem_responses(400, 401, 403))
async def list_schedules(runtime: Runtime) -> list[ScheduleView]:
    """Every schedule with its next fire time."""
    return [_view(s) for s in await runtime.store.list_schedules()]


@get("/{schedule_id:str}", operation_id="getSchedule", opt=_READ, security=SECURITY,
     responses=problem_responses(400, 401, 403, 404))
async def get_schedule(schedule_id: ScheduleId, runtime: Runtime) -> ScheduleView:
    """One schedule."""
    return _view(await _schedule_or_404(runtime, schedule_id))


@get("/{schedule_id:str}/fires", operation_id="listScheduleFires", opt=_READ, security=SECURITY,
     responses=problem_responses(400, 401, 403, 404))
async def list_fires(schedule_id: ScheduleId, runtime: Runtime) -> list[FireView]:
    """Recent fires, newest first: started (with the job id), coalesced or missed."""
    await _schedule_or_404(runtime, schedule_id)
    return [fire_view(f) for f in await runtime.store.list_fires(schedule_id)]


@delete("/{schedule_id:str}", operation_id="deleteSchedule", opt=_ADMIN, security=SECURITY,
        responses=problem_responses(400, 401, 403, 404, 415))
async def delete_schedule(schedule_id: ScheduleId, runtime: Runtime) -> None:
    """Delete a schedule; jobs it started are kept."""
    if not await runtime.store.delete_schedule(schedule_id):
        raise not_found("schedule", schedule_id, _HINT)
    if runtime.scheduler is not None:
        runtime.scheduler.remove(schedule_id)


schedules_router = Router(path="/v1/schedules", tags=["schedules"], route_handlers=[
    create_schedule, list_schedules, get_schedule, list_fires, delete_schedule])

__all__ = ["schedules_router"]
