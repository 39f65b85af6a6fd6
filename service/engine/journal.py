"""The round journal: where the engine writes a job's life as it happens, and where a resumed job reads it back.

The engine awaits its journal at every round start, every measured alternative, every decision and every
job event, and goes on only once the journal returns, so whatever a crash interrupts, everything before it
is stored. The service's journal is the store (`service.workers`), the job process's journal is its pipe
to the service, and the CLI and tests use `MemoryJournal`.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from service.domain import Round
from service.engine.events import JobEvent


class RoundJournal(Protocol):
    """Durable record of one job's rounds and events; each call returns once the entry is stored."""

    async def record_round(self, round_: Round, /) -> None:
        """Store `round_` as it is now: started (running), measured, decided (finished or failed) or interrupted.

        A round is recorded under its index; a later call for the same index replaces the earlier entry,
        until the round reaches a terminal state, after which it never changes.
        """
        ...

    async def record_event(self, event: JobEvent, /) -> None:
        """Store a job event (started, step skipped, job finished with its state)."""
        ...


class MemoryJournal:
    """A journal kept in memory: the CLI's, and the one tests read."""

    def __init__(self) -> None:
        self.rounds: dict[int, Round] = {}
        self.entries: list[Round] = []
        self.events: list[JobEvent] = []

    async def record_round(self, round_: Round, /) -> None:
        """Keep a snapshot (the engine goes on changing its own copy)."""
        snapshot = msgspec.structs.replace(round_)
        self.rounds[round_.index] = snapshot
        self.entries.append(snapshot)

    async def record_event(self, event: JobEvent, /) -> None:
        self.events.append(event)

    def history(self) -> list[Round]:
        """The rounds as a resumed job reads them back, in index order."""
        return [self.rounds[i] for i in sorted(self.rounds)]


class NullJournal:
    """Stores nothing (a job nobody will resume)."""

    async def record_round(self, round_: Round, /) -> None:
        return None

    async def record_event(self, event: JobEvent, /) -> None:
        return None
