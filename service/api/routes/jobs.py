"""Jobs: create (idempotent), list with filters and cursor pagination, get, cancel, rounds, report."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated, Any

from litestar import Request, Response, Router, get, post
from litestar.params import HeaderParameter, JSONBody, PathParameter, QueryParameter

from service.api.auth import SECURITY, key_id_of
from service.api.job_charts import job_charts
from service.api.job_views import read_view
from service.api.problems import Problem, not_found, problem_responses
from service.api.routes.deps import Runtime
from service.api.wire import JobCreate, JobList, JobView, RoundView, job_view, round_view
from service.domain import Job, JobState
from service.engine import TuningReport, load_report, progress_report, render_html, render_markdown
from service.store import JobRecord
from service.workers.requests import JobRequestError, new_job

_READ, _WRITE = {"scope": "read"}, {"scope": "write"}
_JOB_HINT = "GET /v1/jobs lists the jobs this service knows"
# A long-poll holds a connection and delays a graceful shutdown by at most this long.
MAX_WAIT_SECONDS = 60.0
JobId = Annotated[str, PathParameter(description="Job id, as returned by POST /v1/jobs.", max_length=64)]


async def _job_or_404(runtime: Runtime, job_id: str) -> JobRecord:
    job = await runtime.store.get_job(job_id)
    if job is None:
        raise not_found("job", job_id, _JOB_HINT)
    return job


@post("/", operation_id="createJob", opt=_WRITE, security=SECURITY, status_code=202,
      responses=problem_responses(400, 401, 403, 413, 415, 422))
async def create_job(
    data: JSONBody[JobCreate],
    runtime: Runtime,
    request: Request[Any, Any, Any],
    idempotency_key: Annotated[str | None, HeaderParameter(
        name="Idempotency-Key", required=False, min_length=1, max_length=200,
        description="Retrying with the same key and body returns the same job instead of a second one.")] = None,
) -> Response[JobView]:
    """Queue a tuning job: 202 with a Location to poll for a new job, 200 when an Idempotency-Key replay returns it.

    The job runs in the background; follow `next` in the body (long-poll, events, cancel).
    """
    try:
        new = new_job(data, runtime.plugins, created_by=key_id_of(request), idempotency_key=idempotency_key)
    except JobRequestError as exc:
        raise Problem(422, "invalid-job", "Invalid job request", exc.detail, field=exc.field, hint=exc.hint) from exc
    job, created = await runtime.store.create_job(new)
    if created:
        runtime.workers.wake()
        runtime.bell.ring()
    view = await read_view(runtime.store, job)
    runtime.job_views.written(view)
    return Response(view, status_code=202 if created else 200, headers={"Location": f"/v1/jobs/{job.id}"})


@get("/", operation_id="listJobs", opt=_READ, security=SECURITY, responses=problem_responses(400, 401, 403, 422))
async def list_jobs(
    runtime: Runtime,
    job_state: Annotated[JobState | None, QueryParameter(name="state")] = None,
    playbook: Annotated[str | None, QueryParameter(max_length=200)] = None,
    runner: Annotated[str | None, QueryParameter(max_length=200)] = None,
    schedule_id: Annotated[str | None, QueryParameter(max_length=64)] = None,
    limit: Annotated[int, QueryParameter(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, QueryParameter(max_length=400, description="`next_cursor` of the previous page.")] = None,
) -> JobList:
    """Jobs newest first, filtered by state, playbook, runner or schedule."""
    async def read() -> JobList:
        page = await runtime.store.list_jobs(state=job_state, playbook=playbook, runner=runner,
                                             schedule_id=schedule_id, limit=limit, cursor=cursor)
        # One read for the page and its queue positions: a read per job made a page of queued jobs slow.
        return JobList(items=[job_view(job, page.queue_positions.get(job.id)) for job in page.items],
                       next_cursor=page.next_cursor)

    return await runtime.job_views.page((job_state, playbook, runner, schedule_id, limit, cursor), read)


@get("/{job_id:str}", operation_id="getJob", opt=_READ, security=SECURITY,
     responses=problem_responses(400, 401, 403, 404))
async def get_job(
    job_id: JobId,
    runtime: Runtime,
    wait: Annotated[float, QueryParameter(
        ge=0, le=MAX_WAIT_SECONDS,
        description="Long-poll: hold the request up to this many seconds and answer as soon as the job's state "
                    "changes (at once when it has finished).")] = 0.0,
) -> JobView:
    """One job, with its queue position while it waits for its runner resource.

    Without `wait`, a queued or running job's view is refreshed in the background (many clients poll the
    same jobs): by default it is under half a second old, and never more than five seconds; with `wait`,
    the answer is read from the database.
    """
    if wait > 0:
        waited = await read_view(runtime.store, await _state_change(runtime, await _job_or_404(runtime, job_id), wait))
        runtime.job_views.put(waited)
        return waited

    async def read() -> JobView | None:
        job = await runtime.store.get_job(job_id)
        return None if job is None else await read_view(runtime.store, job)

    view = await runtime.job_views.view(job_id, read)
    if view is None:
        raise not_found("job", job_id, _JOB_HINT)
    return view


async def _state_change(runtime: Runtime, job: JobRecord, wait: float) -> JobRecord:
    """The job once its state differs from `job.state`, or as it is when `wait` seconds have passed."""
    deadline = time.monotonic() + wait
    while not job.state.is_terminal():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        # The bell rings on every commit of this process; the poll catches jobs run by other instances.
        await runtime.bell.wait(min(remaining, runtime.settings.sse_poll_seconds))
        current = await runtime.store.get_job(job.id)
        if current is None:
            break
        if current.state != job.state:
            return current
        job = current
    return job


@post("/{job_id:str}/cancel", operation_id="cancelJob", opt=_WRITE, security=SECURITY, status_code=202,
      responses=problem_responses(400, 401, 403, 404, 409, 415))
async def cancel_job(job_id: JobId, runtime: Runtime) -> Response[JobView]:
    """Cancel a job: a queued job at once; a running one stops its round and keeps the last accepted deployment."""
    job = await runtime.store.request_cancel(job_id)
    if job is None:
        raise not_found("job", job_id, _JOB_HINT)
    if job.state.is_terminal() and job.state != JobState.CANCELLED:
        raise Problem(409, "job-finished", "Job already finished", f"job {job_id} is {job.state.value}",
                      field="job_id", hint="only queued or running jobs can be cancelled")
    await runtime.workers.request_cancel(job_id)
    runtime.bell.ring()
    view = await read_view(runtime.store, job)
    runtime.job_views.written(view)
    return Response(view, status_code=202, headers={"Location": f"/v1/jobs/{job_id}"})


@get("/{job_id:str}/rounds", operation_id="listJobRounds", opt=_READ, security=SECURITY,
     responses=problem_responses(400, 401, 403, 404))
async def list_rounds(job_id: JobId, runtime: Runtime) -> list[RoundView]:
    """Every round of a job in order: committed, failed and interrupted ones, each with its decision."""
    await _job_or_404(runtime, job_id)
    return [round_view(r) for r in await runtime.store.list_rounds(job_id)]


@get("/{job_id:str}/report", operation_id="getJobReport", opt=_READ, security=SECURITY,
     responses=problem_responses(401, 403, 404, 422))
async def get_report(
    job_id: JobId, runtime: Runtime, request: Request[Any, Any, Any],
    format: Annotated[str | None, QueryParameter(  # noqa: A002 - the query parameter is called `format`
        pattern="^(json|markdown|html)$", description="json, markdown or html; else the Accept header decides.")] = None,
) -> Response[Any]:
    """The job's report: headline, the cumulative table of rounds and decisions, SLO assessment, final launch
    commands (JSON, Markdown, or HTML with charts). A job still running shows its rounds so far."""
    job = await _job_or_404(runtime, job_id)
    report = await job_report(runtime, job)
    wanted = format or _format_from_accept(request.headers.get("accept", ""))
    if wanted == "markdown":
        return Response(render_markdown(report), media_type="text/markdown; charset=utf-8")
    if wanted == "html":
        return Response(render_html(report), media_type="text/html; charset=utf-8")
    return Response(report)


async def job_report(runtime: Runtime, job: JobRecord) -> TuningReport:
    """The report the engine stored when the job ended, else one built from its committed rounds."""
    stored = load_report(job.report) if job.state.is_terminal() else None
    if stored is not None:
        stored.job.created_at = _when(job.created_at)
        stored.job.finished_at = _when(job.finished_at)
        if stored.charts is None:  # stored before reports carried their charts
            chosen = stored.path[-1] if stored.final is not None and stored.path else None
            stored.charts = job_charts(runtime.plugins, job, await runtime.store.list_rounds(job.id), chosen)
        return stored
    # The job line only: its scenario is read for the charts alone (the deployment each round ran).
    domain = Job(id=job.id, playbook=job.playbook, runner=job.runner, state=job.state, stop_reason=job.stop_reason,
                 created_at=_when(job.created_at), finished_at=_when(job.finished_at))
    rounds = await runtime.store.list_rounds(job.id)
    report = progress_report(domain, rounds)
    report.charts = job_charts(runtime.plugins, job, rounds, None)
    return report


def _when(timestamp: float | None) -> datetime | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, UTC)


def _format_from_accept(accept: str) -> str:
    if "text/html" in accept:
        return "html"
    if "text/markdown" in accept:
        return "markdown"
    return "json"


def jobs_router(extra: list[Any]) -> Router:
    """The /v1/jobs router; `extra` adds handlers that live in other modules (events)."""
    return Router(path="/v1/jobs", route_handlers=[create_job, list_jobs, get_job, cancel_job, list_rounds,
                                                   get_report, *extra], tags=["jobs"])
