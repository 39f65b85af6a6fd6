"""Simulated rounds in worker processes, so a job's concurrent rounds use every core of the machine.

The simulator is pure Python and CPU-bound: rounds the engine runs at once (a technique's alternatives, a
round's repeats) would take turns on one core in the service's process. Here each goes to a pool of
`spawn`ed workers that hold the built-in cost models and their step memos for the life of the pool. A
round's figures depend only on its scenario, seed and cost model (the memo answers on snapped shapes), so
a worker computes exactly what the service's own process would.

`SGLANG_TUNER_SIMULATED_PROCESSES` sets the pool size (default: the CPUs this process may run on; 1 runs
every round in the service's process, one after another).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import msgspec

from service import Calibration, CostModel, RoundContext, RoundResult, Scenario

ENV = "SGLANG_TUNER_SIMULATED_PROCESSES"

_pool: ProcessPoolExecutor | None = None
_pool_size = 0
_lock = threading.Lock()
_builtin: dict[str, type] | None = None


def processes() -> int:
    """The pool size: `SGLANG_TUNER_SIMULATED_PROCESSES`, else the CPUs this process may use."""
    raw = os.environ.get(ENV, "").strip()
    if raw:
        try:
            return max(1, int(raw))
        except ValueError:
            raise ValueError(f"{ENV}={raw!r} is not a whole number of processes (set 1 to use none)") from None
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - platforms without affinity
        return max(1, os.cpu_count() or 1)


def builtin_cost_models() -> dict[str, CostModel]:
    """The built-in cost models by name, as a worker registers them."""
    from plugins.cost_models import register_cost_models

    found: dict[str, CostModel] = {}
    register_cost_models(lambda model: found.__setitem__(model.name, model))
    return found


def portable(cost_models: dict[str, CostModel]) -> bool:
    """Whether a worker has the same cost models (only built-in ones, under their own names)."""
    global _builtin
    if _builtin is None:
        _builtin = {name: type(model) for name, model in builtin_cost_models().items()}
    return all(_builtin.get(name) is type(model) for name, model in cost_models.items())


def _executor(size: int) -> ProcessPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size != size or getattr(_pool, "_broken", False):
            if _pool is not None:
                _pool.shutdown(wait=False, cancel_futures=True)
            _pool = ProcessPoolExecutor(max_workers=size, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_die_with_parent, initargs=(os.getpid(),))
            _pool_size = size
        return _pool


async def simulate_elsewhere(scenario: Scenario, seed: int | None, context: RoundContext, size: int) -> RoundResult:
    """One simulated round in a worker process of a pool of `size`, with the context's cost models."""
    payload = msgspec.msgpack.encode(scenario)
    loop = asyncio.get_running_loop()
    names = sorted(context.cost_models)
    calibrations = msgspec.msgpack.encode(context.calibrations)
    args = (payload, seed, names, context.cost_model, calibrations)
    try:
        raw = await loop.run_in_executor(_executor(size), _work, *args)
    except BrokenProcessPool:  # a worker was killed (out of memory, by hand): a fresh pool runs the round once more
        raw = await loop.run_in_executor(_executor(size), _work, *args)
    return msgspec.msgpack.decode(raw, type=RoundResult)


_worker_models: dict[str, CostModel] | None = None


def _die_with_parent(parent: int) -> None:
    """In the worker: exit as soon as the process that owns the pool is gone (any way it ended).

    A watch on the parent's pid rather than a parent-death signal: the kernel sends that signal when the
    *thread* that spawned the worker exits, and the pool outlives the thread (an event loop on a thread of
    the service) that first used it. Job-control signals meant for the owner are ignored here.
    """
    for number in (signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(number, signal.SIG_IGN)
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _work(payload: bytes, seed: int | None, names: list[str], cost_model: str | None, calibrations: bytes) -> bytes:
    """In the worker: the round as the service's process would simulate it (the same cost models), encoded."""
    global _worker_models
    from plugins.runners.simulated import simulate_here

    if _worker_models is None:
        _worker_models = builtin_cost_models()
    scenario = msgspec.msgpack.decode(payload, type=Scenario)
    context = RoundContext(cost_models={name: _worker_models[name] for name in names}, cost_model=cost_model,
                           calibrations=msgspec.msgpack.decode(calibrations, type=list[Calibration]))
    result: Any = simulate_here(scenario, seed, context)
    return msgspec.msgpack.encode(result)
