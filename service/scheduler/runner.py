"""Scheduled re-tuning: cron schedules from the project's tables, fired by APScheduler, claimed in the database.

- Schedules are plain rows (a cron, a timezone, a job request as JSON); APScheduler runs with an in-memory
  job store rebuilt from them at start, so nothing pickled is ever loaded from the database.
- Each fire is claimed by inserting its (schedule, fire time) row; with several instances on one database
  exactly one inserts it and enqueues the job, the others see the row and do nothing.
- While running, a fire late by less than its misfire grace runs once (coalesce=True folds a backlog into a
  single run); later than that APScheduler reports it missed and it is recorded as `missed`.
- Fires that fell while no instance ran are caught up at start: the newest runs once (`catch_up=run_once`,
  the others are recorded `coalesced`) or, with `catch_up=skip`, fires older than the grace are `missed`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime

import msgspec
from apscheduler.events import EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from service.logs import get_logger
from service.plugin_host import PluginHost
from service.scheduler.cron import cron_trigger, fire_times, latest_fire_time
from service.store import CatchUp, FireOutcome, JobRecord, ScheduleRecord, Store
from service.workers.metrics import ServiceMetrics
from service.workers.pool import JobWorkers
from service.workers.requests import JobRequest, JobRequestError, new_job

log = get_logger(__name__)

SYNC_SECONDS = 30.0  # how soon a schedule created or deleted through another instance is picked up
_SYNC_JOB = "__sync_schedules__"


class ScheduleRunner:
    """Loads schedules into APScheduler and turns each fire into exactly one job."""

    def __init__(self, store: Store, plugins: PluginHost, *, workers: JobWorkers | None = None,
                 metrics: ServiceMetrics | None = None, owner: str = "scheduler",
                 clock: Callable[[], float] = time.time) -> None:
        self.store, self.plugins, self.workers = store, plugins, workers
        self.metrics = metrics or ServiceMetrics()
        self.owner, self.clock = owner, clock
        self._scheduler: AsyncIOScheduler | None = None
        self._pending: set[asyncio.Task[object]] = set()

    async def start(self) -> None:
        """Catch up fires missed during downtime, then schedule every enabled schedule."""
        self._scheduler = AsyncIOScheduler(timezone=UTC)
        self._scheduler.add_listener(self._on_missed, EVENT_JOB_MISSED)
        await self.sync(catch_up=True)
        self._scheduler.add_job(self.sync, "interval", seconds=SYNC_SECONDS, id=_SYNC_JOB, coalesce=True,
                                max_instances=1, misfire_grace_time=None)
        self._scheduler.start()

    async def stop(self) -> None:
        """Stop firing; fires that fall while stopped are caught up at the next start."""
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.shutdown(wait=False)
        self._scheduler = None
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    async def sync(self, *, catch_up: bool = False) -> None:
        """Match APScheduler's jobs to the stored schedules (added, deleted, disabled)."""
        if self._scheduler is None:
            return
        stored = {s.id: s for s in await self.store.list_schedules() if s.enabled}
        for job in self._scheduler.get_jobs():
            if job.id != _SYNC_JOB and job.id not in stored:
                job.remove()
        for schedule in stored.values():
            if catch_up:
                await self.catch_up(schedule)
            if self._scheduler.get_job(schedule.id) is None:
                self.add(schedule)

    def add(self, schedule: ScheduleRecord) -> None:
        """Start firing one schedule in this instance."""
        if self._scheduler is None or not schedule.enabled:
            return
        self._scheduler.add_job(
            self.fire_due, cron_trigger(schedule.cron, schedule.timezone), id=schedule.id, args=[schedule.id],
            replace_existing=True, max_instances=1,
            # Chosen, not defaulted: a late fire within the grace runs once; a backlog coalesces into one run.
            coalesce=True, misfire_grace_time=schedule.misfire_grace_seconds)

    def remove(self, schedule_id: str) -> None:
        """Stop firing one schedule in this instance."""
        if self._scheduler is not None and self._scheduler.get_job(schedule_id) is not None:
            self._scheduler.remove_job(schedule_id)

    async def fire_due(self, schedule_id: str) -> JobRecord | None:
        """APScheduler's callback: fire the schedule's most recent due time."""
        schedule = await self.store.get_schedule(schedule_id)
        if schedule is None or not schedule.enabled:
            return None
        now = datetime.fromtimestamp(self.clock(), UTC)
        due = latest_fire_time(cron_trigger(schedule.cron, schedule.timezone), now,
                               max(schedule.misfire_grace_seconds, 1))
        if due is None:
            return None
        return await self.fire(schedule, due.timestamp())

    async def fire(self, schedule: ScheduleRecord, fire_at: float) -> JobRecord | None:
        """Claim the fire at `fire_at` and enqueue its job; None when another instance claimed it first."""
        try:
            request = msgspec.convert(schedule.job_request, JobRequest)
            job = new_job(request, self.plugins, schedule_id=schedule.id,
                          idempotency_key=f"schedule:{schedule.id}:{fire_at!r}")
        except (msgspec.ValidationError, JobRequestError) as exc:
            log.error("schedule_invalid", schedule=schedule.id, error=str(exc))
            return None
        claimed = await self.store.record_fire(schedule.id, fire_at, FireOutcome.STARTED, self.owner, job)
        if claimed is None:
            return None
        self.metrics.schedule_fires.labels(outcome=FireOutcome.STARTED.value).inc()
        if self.workers is not None:
            self.workers.wake()
        log.info("schedule_fired", schedule=schedule.id, fire_at=fire_at, job=claimed[1] and claimed[1].id)
        return claimed[1]

    async def catch_up(self, schedule: ScheduleRecord) -> list[FireOutcome]:
        """Record or run the fires that fell while no instance was running; returns what was recorded."""
        now = self.clock()
        since = schedule.last_fire_at if schedule.last_fire_at is not None else schedule.created_at
        missed = [t.timestamp() for t in fire_times(cron_trigger(schedule.cron, schedule.timezone),
                                                    datetime.fromtimestamp(since, UTC), datetime.fromtimestamp(now, UTC))]
        if not missed:
            return []
        outcomes: list[FireOutcome] = []
        *older, newest = missed
        run_newest = schedule.catch_up == CatchUp.RUN_ONCE or now - newest <= schedule.misfire_grace_seconds
        older_outcome = FireOutcome.COALESCED if run_newest and schedule.catch_up == CatchUp.RUN_ONCE \
            else FireOutcome.MISSED
        for fire_at in older:
            if await self.store.record_fire(schedule.id, fire_at, older_outcome, self.owner) is not None:
                self.metrics.schedule_fires.labels(outcome=older_outcome.value).inc()
                outcomes.append(older_outcome)
        if run_newest:
            if await self.fire(schedule, newest) is not None:
                outcomes.append(FireOutcome.STARTED)
        elif await self.store.record_fire(schedule.id, newest, FireOutcome.MISSED, self.owner) is not None:
            self.metrics.schedule_fires.labels(outcome=FireOutcome.MISSED.value).inc()
            outcomes.append(FireOutcome.MISSED)
        if outcomes:
            log.warning("schedule_caught_up", schedule=schedule.id, outcomes=[o.value for o in outcomes])
        return outcomes

    def _on_missed(self, event: JobExecutionEvent) -> None:
        # Later than its misfire grace: record the fire as missed so it is visible, never silently lost.
        if event.job_id == _SYNC_JOB:
            return
        task = asyncio.get_running_loop().create_task(self.store.record_fire(
            event.job_id, event.scheduled_run_time.timestamp(), FireOutcome.MISSED, self.owner))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        self.metrics.schedule_fires.labels(outcome=FireOutcome.MISSED.value).inc()
