"""A cancelled round is cancelled: a cancel that lands just as an awaited call resolves is not dropped.

On Python 3.11 `asyncio.wait_for` returns the inner result when the cancel and the result arrive in the same loop
step, so a cancelled round went on running; the runners wait under `asyncio.timeout` instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import pytest

from plugins.runners.ray.round import _call
from service.workers.bell import EventBell


class _Ref:
    """What `_call` needs of a Ray ObjectRef: a concurrent future of its value."""

    def __init__(self) -> None:
        self.value: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def future(self) -> concurrent.futures.Future[Any]:
        return self.value


@pytest.mark.parametrize("timeout", [30.0, None])
def test_a_cancel_landing_as_a_ray_call_resolves_cancels_the_caller(timeout: float | None) -> None:
    async def race() -> str:
        ref = _Ref()
        caller = asyncio.create_task(_call(ref, timeout))
        await asyncio.sleep(0)  # the caller waits on the ref
        ref.value.set_result("polled")
        await asyncio.sleep(0)  # the result reaches the loop; the caller is not yet woken
        caller.cancel()
        try:
            return str(await caller)
        except asyncio.CancelledError:
            return "cancelled"

    assert asyncio.run(race()) == "cancelled"


def test_a_ray_call_past_its_timeout_raises_timeout_and_in_time_returns_the_value() -> None:
    async def calls() -> tuple[str, str]:
        late, prompt = _Ref(), _Ref()
        prompt.value.set_result("ready")
        try:
            await _call(late, 0.01)
            timed = "returned"
        except TimeoutError:
            timed = "timeout"
        return timed, await _call(prompt, 1.0)

    assert asyncio.run(calls()) == ("timeout", "ready")


def test_a_bell_wait_cancelled_as_it_rings_cancels_the_waiter() -> None:
    async def race() -> str:
        bell = EventBell()
        waiter = asyncio.create_task(bell.wait(30.0))
        await asyncio.sleep(0)
        bell.ring()
        waiter.cancel()  # in the same loop step as the ring
        try:
            await waiter
            return "returned"
        except asyncio.CancelledError:
            return "cancelled"

    assert asyncio.run(race()) == "cancelled"
