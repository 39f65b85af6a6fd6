"""A wake-up signal for in-process waiters (SSE streams, the claim loop); the store stays the truth."""

from __future__ import annotations

import asyncio
import contextlib


class EventBell:
    """Rung after every committed change; waiters wake at once instead of at their next poll."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def ring(self) -> None:
        """Wake everyone waiting now."""
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout: float) -> None:
        """Return at the next ring or after `timeout` seconds, whichever comes first."""
        event = self._event
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await event.wait()
