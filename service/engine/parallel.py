"""Measuring ahead: the repeats and alternatives a sequential walk will ask for, started at once.

A runner that can hold several deployments at once (`Runner.parallel_rounds`: a Ray cluster with room for
four placement groups, the simulator on every core) measures a round's repeats and a technique's
alternatives concurrently. The engine still walks them in the order a sequential run does and decides on
each as it comes, so its decisions, its budget accounting and its journal are those of the sequential run
on the same seeds; only the wall time changes. What the walk no longer needs (the budget ran out, a repeat
failed, the job was stopped) is cancelled, and a result that was already in is discarded unseen.

With a width of 1 nothing is started ahead: each measurement runs when the walk reaches it. A job's own
limit (`tune --parallel N`) caps the runner's answer.
"""

from __future__ import annotations

import asyncio

from service.components import RoundContext, Runner
from service.domain import RoundResult, Scenario
from service.engine.measure import measure
from service.engine.state import fingerprint

__all__ = ["Prefetch"]


class Prefetch:
    """Measurements of (scenario, seed) started ahead of the walk, at most `width` running at once."""

    def __init__(self, runner: Runner, context: RoundContext | None, *, limit: int | None = None) -> None:
        self.runner = runner
        self.context = context
        self.limit = limit
        self.width = 1
        self._slots = asyncio.Semaphore(1)
        self._tasks: dict[tuple[str, int], asyncio.Task[RoundResult]] = {}

    async def size_for(self, scenario: Scenario) -> int:
        """Ask the runner how many rounds the size of `scenario`'s it holds at once (kept while any run)."""
        if self._tasks:
            return self.width
        try:
            width = int(await self.runner.parallel_rounds(scenario, self.context))
        except Exception:  # a runner that cannot say how much room it has measures one round at a time
            width = 1
        self.width = max(1, min(width, self.limit) if self.limit is not None else width)
        self._slots = asyncio.Semaphore(self.width)
        return self.width

    def start(self, scenario: Scenario, seeds: list[int]) -> None:
        """Start measuring `scenario` on each of `seeds` not already started (nothing at width 1)."""
        if self.width <= 1:
            return
        key = fingerprint(scenario)
        for seed in seeds:
            if (key, seed) not in self._tasks:
                self._tasks[(key, seed)] = asyncio.create_task(self._measure(scenario, seed))

    async def take(self, scenario: Scenario, seed: int) -> RoundResult:
        """The measurement of `scenario` on `seed`: the one started ahead, else a new one now."""
        task = self._tasks.pop((fingerprint(scenario), seed), None)
        if task is None:
            return await self._measure(scenario, seed)
        return await task

    def discard(self) -> None:
        """Cancel every measurement the walk did not take (their deployments are torn down by the runner)."""
        tasks, self._tasks = list(self._tasks.values()), {}
        for task in tasks:
            task.cancel()

    async def drain(self) -> None:
        """Cancel what the walk did not take and wait until each has stopped (no deployment left running)."""
        tasks, self._tasks = list(self._tasks.values()), {}
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _measure(self, scenario: Scenario, seed: int) -> RoundResult:
        async with self._slots:
            [result] = await measure(self.runner, scenario, seeds=[seed], context=self.context)
            return result
