"""Progress events of a tuning job: sent to plugins through the `on_*` hooks and to an in-process callback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import msgspec
import structlog

EventKind = Literal["job_started", "round_started", "round_finished", "step_skipped", "step_reopened",
                    "branch_started", "job_paused", "job_finished"]

log = structlog.get_logger(__name__)


class JobEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One thing that happened in a job, in the order it happened."""

    kind: EventKind
    job_id: str
    round_index: int | None = None
    technique: str | None = None
    verdict: str | None = None
    state: str | None = None
    message: str = ""
    rounds_done: int = 0
    rounds_budget: int = 0
    # step_skipped on a branch: the branch's root round (None on the main line).
    line: int | None = None


EventCallback = Callable[[JobEvent], None]


class EventSink:
    """Fans one event out to the plugin hooks and an optional callback; a failing listener never stops a job."""

    def __init__(self, hook: Any | None = None, callback: EventCallback | None = None) -> None:
        self._hook = hook
        self._callback = callback
        self.events: list[JobEvent] = []

    def emit(self, event: JobEvent) -> None:
        """Record `event`, call the matching `on_*` hook, then the callback."""
        self.events.append(event)
        try:
            self._call_hook(event)
        except Exception:  # hooks must never raise (service.hookspecs); a plugin bug must not kill the job
            log.warning("event_hook_failed", kind=event.kind, job_id=event.job_id, exc_info=True)
        if self._callback is not None:
            try:
                self._callback(event)
            except Exception:
                log.warning("event_callback_failed", kind=event.kind, job_id=event.job_id, exc_info=True)

    def _call_hook(self, event: JobEvent) -> None:
        if self._hook is None:
            return
        if event.kind == "round_started":
            self._hook.on_round_started(job_id=event.job_id, round_index=event.round_index,
                                        technique=event.technique)
        elif event.kind == "round_finished":
            self._hook.on_round_finished(job_id=event.job_id, round_index=event.round_index,
                                         technique=event.technique, verdict=event.verdict)
        elif event.kind in ("job_finished", "job_paused"):
            self._hook.on_job_finished(job_id=event.job_id, state=event.state)
