"""Background job workers: claim under a lease, heartbeat, commit every round, cancel, resume.

On start the pool reaps stale leases (jobs whose worker died), which puts them back in the queue with their
open round recorded as interrupted; they are then claimed like any queued job and resume after their last
committed round. A job whose runner resource is held by another running job waits in the queue (the store
refuses a second holder), so two jobs never share a GPU host.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Coroutine
from dataclasses import dataclass
from secrets import token_hex
from typing import Any

import msgspec

from service.domain import JobState, Round, RoundState
from service.engine import JobEvent, TuningReport, progress_report
from service.logs import get_logger
from service.store import JobRecord, LeaseLostError, Store
from service.workers.bell import EventBell
from service.workers.executor import JobExecutor, StoreJournal, skipped_steps, to_domain_job
from service.workers.metrics import ServiceMetrics

log = get_logger(__name__)


@dataclass(frozen=True)
class WorkerSettings:
    """How many jobs run at once and how leases are kept.

    A lease is renewed every `heartbeat_seconds`; a worker that misses renewals for `lease_seconds` is
    presumed dead and its job is reaped by the next instance to start (or the next reap pass).
    """

    slots: int = 4
    lease_seconds: float = 30.0
    heartbeat_seconds: float = 10.0
    poll_seconds: float = 1.0
    reap_every_seconds: float = 15.0
    # How long a stopped job may take to reach a safe point and journal its ending before it is cancelled.
    stop_grace_seconds: float = 30.0


def instance_name() -> str:
    """A lease owner id unique to this process: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{token_hex(3)}"


class _Cancelled(Exception):
    """The run task was cancelled on purpose; the reason says why."""


class JobWorkers:
    """Runs queued jobs in this process, at most `settings.slots` at a time."""

    def __init__(self, store: Store, executor: JobExecutor, *, settings: WorkerSettings | None = None,
                 metrics: ServiceMetrics | None = None, bell: EventBell | None = None,
                 owner: str | None = None) -> None:
        self.store = store
        self.executor = executor
        self.settings = settings or WorkerSettings()
        self.metrics = metrics or ServiceMetrics()
        self.bell = bell or EventBell()
        self.owner = owner or instance_name()
        self._running: dict[str, asyncio.Task[None]] = {}
        self._runs: dict[str, asyncio.Task[TuningReport]] = {}
        self._stop_reason: dict[str, str] = {}
        self._committing: set[str] = set()
        self._deferred_cancel: set[str] = set()
        self._wake = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def running_job_ids(self) -> list[str]:
        """Jobs this process is running now."""
        return list(self._running)

    async def start(self) -> None:
        """Reap stale leases, then start claiming queued jobs."""
        await self.reap()
        self._loop = asyncio.create_task(self._claim_loop(), name="job-claim-loop")

    async def stop(self) -> None:
        """Stop claiming; hand running jobs back to the queue so the next start resumes them."""
        self._stopping = True
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
        for job_id in list(self._runs):
            self._cancel_run(job_id, "shutdown")
        await asyncio.gather(*self._running.values(), return_exceptions=True)

    def wake(self) -> None:
        """Look for queued work now (a job was created or a resource freed)."""
        self._wake.set()

    async def reap(self) -> list[str]:
        """Requeue jobs whose lease expired; returns their ids."""
        reaped = await self.store.reap_stale_leases()
        if reaped:
            self.metrics.reaped.inc(len(reaped))
            log.warning("jobs_reaped", jobs=reaped, detail="their worker stopped renewing its lease; requeued")
            self.bell.ring()
        return reaped

    async def _claim_loop(self) -> None:
        since_reap = 0.0
        while not self._stopping:
            try:
                while len(self._running) < self.settings.slots:
                    job = await self.store.claim_job(self.owner, self.settings.lease_seconds)
                    if job is None:
                        break
                    self._running[job.id] = asyncio.create_task(self._run(job), name=f"job-{job.id}")
                    self.bell.ring()
                if since_reap >= self.settings.reap_every_seconds:
                    since_reap = 0.0
                    await self.reap()
            except Exception:  # noqa: BLE001 - a database hiccup must not stop the loop
                log.exception("claim_loop_error")
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.poll_seconds):
                    await self._wake.wait()
            since_reap += self.settings.poll_seconds

    async def _run(self, record: JobRecord) -> None:
        rounds = await self.store.list_rounds(record.id)
        run = asyncio.create_task(self._execute(record, rounds))
        self._runs[record.id] = run
        heartbeat = asyncio.create_task(self._heartbeat(record.id, run))
        try:
            await self._settle(record, run)
        finally:
            heartbeat.cancel()
            self._running.pop(record.id, None)
            self._runs.pop(record.id, None)
            self._stop_reason.pop(record.id, None)
            self._deferred_cancel.discard(record.id)
            self.bell.ring()
            self.wake()  # the freed slot or resource may let a queued job start

    async def _execute(self, record: JobRecord, rounds: list[Round]) -> TuningReport:
        def committed(round_: Round) -> None:
            self._observe_round(record.runner, round_)
            self.bell.ring()

        journal = _GuardedJournal(StoreJournal(self.store, record.id, self.owner, on_round=committed), self,
                                  record.id)
        skipped = skipped_steps(await self.store.events_of_kind(record.id, "step_skipped")) if rounds else []
        job = to_domain_job(record, rounds, skipped)
        job.calibrations = await self.store.list_calibrations()
        return await self.executor.run(job, journal)

    async def _settle(self, record: JobRecord, run: asyncio.Task[TuningReport]) -> None:
        try:
            report = await run
            await self._record_ending(record, report)
        except asyncio.CancelledError:
            await self._after_cancel(record)
        except LeaseLostError:
            log.warning("lease_lost", job=record.id, detail="another worker owns this job now; stopped")
        except Exception as exc:  # noqa: BLE001 - an executor crash fails its job, never the worker
            self.metrics.runner_failures.labels(runner=record.runner).inc()
            log.exception("job_failed", job=record.id)
            with contextlib.suppress(LeaseLostError):
                await self.store.finish_job(record.id, self.owner, JobState.FAILED,
                                            f"the tuning engine raised {type(exc).__name__}: {exc}")

    async def _record_ending(self, record: JobRecord, report: TuningReport) -> None:
        """Store the ending the engine decided: paused jobs go back to the queue, the others finish."""
        state = JobState(report.job.state)
        reason = report.job.stop_reason or state.value
        if state is JobState.PAUSED:
            await self.store.release_job(record.id, self.owner)
            log.info("job_released", job=record.id, detail="service stopping; the job resumes on next start")
            return
        if not state.is_terminal():
            state, reason = JobState.FAILED, f"the executor returned a job in state {state.value}"
        await self.store.finish_job(record.id, self.owner, state, reason, msgspec.to_builtins(report))
        log.info("job_finished", job=record.id, state=state.value, reason=reason)

    async def _after_cancel(self, record: JobRecord) -> None:
        """The run was cancelled without the engine's ending (it did not stop in time, or cannot be asked)."""
        reason = self._stop_reason.get(record.id, "shutdown")
        with contextlib.suppress(LeaseLostError):
            if reason == "cancel":
                partial = progress_report(to_domain_job(record, []), await self.store.list_rounds(record.id),
                                          stop_reason="cancelled by a user")
                partial.job.state = JobState.CANCELLED.value
                await self.store.finish_job(record.id, self.owner, JobState.CANCELLED, "cancelled by a user",
                                            msgspec.to_builtins(partial))
                log.info("job_cancelled", job=record.id)
            elif reason == "shutdown":
                await self.store.release_job(record.id, self.owner)
                log.info("job_released", job=record.id, detail="service stopping; the job resumes on next start")

    async def _heartbeat(self, job_id: str, run: asyncio.Task[TuningReport]) -> None:
        while not run.done():
            await asyncio.sleep(self.settings.heartbeat_seconds)
            try:
                cancel = await self.store.renew_lease(job_id, self.owner, self.settings.lease_seconds)
            except LeaseLostError:
                self._cancel_run(job_id, "lease_lost")
                return
            except Exception:  # noqa: BLE001 - a missed heartbeat is retried; the lease has slack
                log.exception("heartbeat_failed", job=job_id)
                continue
            if cancel:
                self._cancel_run(job_id, "cancel")
                return

    def _observe_round(self, runner: str, round_: Round) -> None:
        if not round_.state.is_terminal():
            return
        if round_.started_at is not None and round_.finished_at is not None:
            seconds = (round_.finished_at - round_.started_at).total_seconds()
            self.metrics.round_seconds.labels(runner=runner).observe(max(seconds, 0.0))
        if round_.state == RoundState.FAILED:
            self.metrics.runner_failures.labels(runner=runner).inc()

    async def request_cancel(self, job_id: str) -> None:
        """Stop a job this process runs now, without waiting for its next heartbeat."""
        if job_id in self._runs:
            self._cancel_run(job_id, "cancel")

    def _cancel_run(self, job_id: str, reason: str) -> None:
        """Ask the engine to end the job (it journals the ending); cancel the task if it cannot, or is too slow."""
        self._stop_reason[job_id] = reason
        run = self._runs.get(job_id)
        if run is None:
            return
        ending = _ENDINGS.get(reason)
        if ending is not None and self.executor.stop(job_id, *ending):
            asyncio.get_running_loop().call_later(self.settings.stop_grace_seconds, self._hard_cancel, job_id)
            return
        self._hard_cancel(job_id)

    def _hard_cancel(self, job_id: str) -> None:
        run = self._runs.get(job_id)
        if run is None or run.done():
            return
        if job_id in self._committing:
            self._deferred_cancel.add(job_id)
        else:
            run.cancel()


# Why a run is stopped -> the ending the engine is asked for.
_ENDINGS = {"cancel": (JobState.CANCELLED, "cancelled by a user"),
            "shutdown": (JobState.PAUSED, "the service is stopping; the job resumes on its next start")}


class _GuardedJournal:
    """The store journal, with a hard cancel held back until the entry being written is committed."""

    def __init__(self, inner: StoreJournal, workers: JobWorkers, job_id: str) -> None:
        self.inner = inner
        self.workers = workers
        self.job_id = job_id

    async def record_round(self, round_: Round, /) -> None:
        await self._guard(self.inner.record_round(round_))

    async def record_event(self, event: JobEvent, /) -> None:
        await self._guard(self.inner.record_event(event))

    async def _guard(self, write: Coroutine[Any, Any, None]) -> None:
        self.workers._committing.add(self.job_id)
        try:
            await write
        finally:
            self.workers._committing.discard(self.job_id)
        if self.job_id in self.workers._deferred_cancel:
            self.workers._deferred_cancel.discard(self.job_id)
            raise asyncio.CancelledError
