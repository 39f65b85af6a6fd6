"""Run a coroutine on its own event loop in its own thread, with cancellation carried across.

The simulator's rounds are CPU-bound Python; on the service's event loop they would stall every HTTP
request and every lease heartbeat for the length of a round. On a thread of its own, a job shares the
interpreter (the GIL switches every few milliseconds) but never blocks the loop that serves the API.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def run_on_own_loop(make: Callable[[], Coroutine[Any, Any, T]], *, name: str = "job") -> T:
    """Await `make()` running on a fresh event loop in a new thread.

    Cancelling the caller cancels the coroutine on its loop, waits for it to unwind (so its own cleanup
    runs), then raises `CancelledError` here.
    """
    caller = asyncio.get_running_loop()
    done: asyncio.Future[T] = caller.create_future()
    handle: dict[str, Any] = {}
    started = threading.Event()

    def settle(outcome: Callable[[], object]) -> None:
        if not done.done():
            outcome()

    def target() -> None:
        loop = asyncio.new_event_loop()
        task = loop.create_task(make())
        handle.update(loop=loop, task=task)
        started.set()
        try:
            result = loop.run_until_complete(task)
            caller.call_soon_threadsafe(settle, lambda: done.set_result(result))
        except asyncio.CancelledError:
            caller.call_soon_threadsafe(settle, done.cancel)
        except BaseException as exc:  # noqa: BLE001 - every outcome goes to the caller
            caller.call_soon_threadsafe(settle, lambda error=exc: done.set_exception(error))
        finally:
            loop.close()

    thread = threading.Thread(target=target, name=f"sglang-tuner-{name}", daemon=True)
    thread.start()
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        started.wait()
        handle["loop"].call_soon_threadsafe(handle["task"].cancel)
        try:
            await done
        except BaseException:  # noqa: BLE001, S110 - the coroutine's own unwinding; the cancel is what matters
            pass
        raise


def call_back_on(loop: asyncio.AbstractEventLoop, function: Callable[[T], Coroutine[Any, Any, None]]) -> \
        Callable[[T], Awaitable[None]]:
    """Wrap an async callback of `loop` so a coroutine on another loop can await it."""
    async def across(value: T) -> None:
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(function(value), loop))
    return across
