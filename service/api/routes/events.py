"""Server-Sent Events: a job's progress (round started, round finished, decision, job finished).

Events come from the store, so a stream resumes exactly where it left off (`Last-Event-ID`) and shows the
events of jobs run by any instance sharing the database. The in-process bell only shortens the wait.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Annotated

import msgspec
from litestar import get
from litestar.params import HeaderParameter, QueryParameter
from litestar.response import ServerSentEvent, ServerSentEventMessage

from service.api.auth import SECURITY
from service.api.problems import problem_responses
from service.api.routes.deps import Runtime
from service.api.routes.jobs import JobId, _job_or_404
from service.store import EventRecord

KEEPALIVE_SECONDS = 15.0
MAX_EVENT_ID = 2**31 - 1  # event ids are a 32-bit INTEGER column on PostgreSQL


def _message(job_id: str, event: EventRecord) -> ServerSentEventMessage:
    return ServerSentEventMessage(id=str(event.id), event=event.kind,
                                  data=msgspec.json.encode({"job_id": job_id, **event.body}).decode())


async def _follow(runtime: Runtime, job_id: str, after: int) -> AsyncIterator[ServerSentEventMessage]:
    cursor, quiet_since = after, time.monotonic()
    while True:
        batch = await runtime.store.events_after(job_id, cursor)
        for event in batch:
            cursor = event.id
            yield _message(job_id, event)
            if event.kind == "job_finished":
                return
        if batch:
            quiet_since = time.monotonic()
            continue
        job = await runtime.store.get_job(job_id)
        if job is None or job.state.is_terminal():
            # Finished between the two reads: its last events are committed now; send them and stop.
            for event in await runtime.store.events_after(job_id, cursor):
                yield _message(job_id, event)
            return
        if time.monotonic() - quiet_since > KEEPALIVE_SECONDS:
            quiet_since = time.monotonic()
            yield ServerSentEventMessage(comment="keepalive")
        await runtime.bell.wait(runtime.settings.sse_poll_seconds)


@get("/{job_id:str}/events", operation_id="streamJobEvents", opt={"scope": "read"}, security=SECURITY,
     responses=problem_responses(400, 401, 403, 404), media_type="text/event-stream")
async def stream_events(
    job_id: JobId,
    runtime: Runtime,
    last_event_id: Annotated[int | None, HeaderParameter(name="Last-Event-ID", required=False, ge=0,
                                                         le=MAX_EVENT_ID)] = None,
    after: Annotated[int, QueryParameter(ge=0, le=MAX_EVENT_ID, description="Only events with a larger id.")] = 0,
) -> ServerSentEvent:
    """Follow a job's events until it finishes; reconnecting with Last-Event-ID resumes without gaps."""
    await _job_or_404(runtime, job_id)
    return ServerSentEvent(_follow(runtime, job_id, max(after, last_event_id or 0)))
