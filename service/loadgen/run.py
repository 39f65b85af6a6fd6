"""Drive a benchmark's load: served traffic, warm-up, optional cache flush, then the measured requests.

Requests marked `served` (`bench.warm_prompts`: what a live service had served before the run) go first,
in a phase of their own with its own deadline, at the bench's concurrency, closed loop, and are excluded
from the figures. Like bench_serving: warm-up requests run at the same concurrency and are excluded;
measured requests are sent in order, each when the `--max-concurrency` semaphore allows and, with a
request rate, after a Poisson inter-arrival gap; requests that carry an arrival time (a trace's) no earlier
than that time from the start of their phase (`time_scale` stretches both to an emulator's clock). A
watchdog ends the phase early, naming why: no token arrived for `stall_timeout` seconds while requests were
outstanding, the phase deadline passed, or `watch()` reports that a server process died.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

import httpx
import msgspec
import numpy as np

from service.loadgen.client import Backend, RequestOutcome, send_request
from service.loadgen.prompts import PromptRequest

WATCH_INTERVAL_S = 0.1


class LoadPlan(msgspec.Struct, frozen=True, kw_only=True):
    """How to send a bench's requests (bench_serving flags) and when to give up."""

    base_url: str
    backend: Backend = "sglang"
    model: str = "default"
    max_concurrency: int | None = None
    request_rate: float | None = None
    # Wall seconds per second of the bench's clock: an emulator's time scale, 1 on real servers.
    time_scale: float = 1.0
    ignore_eos: bool = True
    seed: int = 42
    stall_timeout: float = 300.0
    warmup_deadline: float = 300.0
    warm_prompts_deadline: float = 3600.0
    load_deadline: float = 3600.0
    request_timeout: float = 3600.0


class LoadAborted(Exception):
    """A phase ended early; `cause` names why (`stalled`, `deadline`, or what `watch()` reported)."""

    def __init__(self, cause: str, message: str, phase: str) -> None:
        super().__init__(message)
        self.cause = cause
        self.phase = phase


class PhaseResult(msgspec.Struct, kw_only=True):
    """Outcomes of one phase and its wall duration."""

    outcomes: list[RequestOutcome]
    duration: float


class _Progress:
    def __init__(self) -> None:
        self.last = time.monotonic()
        self.outstanding = 0

    def tick(self) -> None:
        """A token (or a request start) arrived now."""
        self.last = time.monotonic()


async def _phase(client: httpx.AsyncClient, plan: LoadPlan, requests: Sequence[PromptRequest], progress: _Progress,
                 poisson: bool) -> PhaseResult:
    semaphore = asyncio.Semaphore(plan.max_concurrency) if plan.max_concurrency else None
    rng = np.random.default_rng(plan.seed)

    async def one(request: PromptRequest) -> RequestOutcome:
        """Send one request when the concurrency limit allows."""
        if semaphore is not None:
            await semaphore.acquire()
        progress.outstanding += 1
        progress.tick()
        try:
            return await send_request(client, plan.base_url, plan.backend, request, model=plan.model,
                                      ignore_eos=plan.ignore_eos, on_progress=progress.tick)
        finally:
            progress.outstanding -= 1
            if semaphore is not None:
                semaphore.release()

    start = time.perf_counter()
    tasks = []
    for request in requests:
        if request.arrival is not None:  # a trace's request: its own time from the phase's start
            await asyncio.sleep(max(start + request.arrival * plan.time_scale - time.perf_counter(), 0.0))
        tasks.append(asyncio.create_task(one(request)))
        if poisson and plan.request_rate and request.arrival is None:
            await asyncio.sleep(float(rng.exponential(1.0 / plan.request_rate)) * plan.time_scale)
        else:
            await asyncio.sleep(0)
    outcomes = list(await asyncio.gather(*tasks))
    return PhaseResult(outcomes=outcomes, duration=time.perf_counter() - start)


async def _watched(work: Awaitable[PhaseResult], progress: _Progress, *, phase: str, deadline: float,
                   stall_timeout: float, watch: Callable[[], str | None]) -> PhaseResult:
    task = asyncio.ensure_future(work)
    started = time.monotonic()
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=WATCH_INTERVAL_S)
            if done:
                return task.result()
            now = time.monotonic()
            if (reason := watch()) is not None:
                raise LoadAborted(reason.split(":", 1)[0], reason, phase)
            if now - started > deadline:
                raise LoadAborted("deadline", f"{phase} did not finish within its {deadline:.0f}s deadline", phase)
            if progress.outstanding and now - progress.last > stall_timeout:
                raise LoadAborted("stalled", f"no token arrived for {stall_timeout:.0f}s with "
                                             f"{progress.outstanding} request(s) outstanding", phase)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _never() -> str | None:
    return None


async def run_load(plan: LoadPlan, warmup: Sequence[PromptRequest], measured: Sequence[PromptRequest], *,
                   between: Callable[[httpx.AsyncClient], Awaitable[None]] | None = None,
                   watch: Callable[[], str | None] = _never) -> tuple[PhaseResult, PhaseResult]:
    """Run the served traffic and the warm-up, then the measured phase; `between` runs just before it.

    `between` is the place for a cache flush and the metrics scrape that starts the round's counter deltas:
    everything sent before it (served traffic and warm-up alike) stays out of the round's figures. The
    returned warm-up result holds the served requests' outcomes first, then the warm-up's.

    Raises:
        LoadAborted: A phase stalled, overran its deadline, or `watch()` reported a failure.
    """
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per request would drown the output
    served = [request for request in warmup if request.served]
    copies = [request for request in warmup if not request.served]
    limits = httpx.Limits(max_connections=max(plan.max_concurrency or max(len(measured), len(served)), 1) + 8,
                          max_keepalive_connections=max(plan.max_concurrency or 16, 1))
    timeout = httpx.Timeout(plan.request_timeout, connect=30.0)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
        progress = _Progress()
        before = await _watched(_phase(client, plan, served, progress, poisson=False), progress,
                                phase="warm_prompts", deadline=plan.warm_prompts_deadline,
                                stall_timeout=plan.stall_timeout, watch=watch)
        progress = _Progress()
        warm = await _watched(_phase(client, plan, copies, progress, poisson=False), progress, phase="warmup",
                              deadline=plan.warmup_deadline, stall_timeout=plan.stall_timeout, watch=watch)
        warm = PhaseResult(outcomes=before.outcomes + warm.outcomes, duration=before.duration + warm.duration)
        if between is not None:
            await between(client)
        progress = _Progress()
        load = await _watched(_phase(client, plan, measured, progress, poisson=True), progress, phase="load",
                              deadline=plan.load_deadline, stall_timeout=plan.stall_timeout, watch=watch)
    return warm, load
