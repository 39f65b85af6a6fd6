"""The round journal: where the engine writes a job's life as it happens, and where a resumed job reads it back.

The engine awaits its journal at every round start, every measured alternative, every decision and every
job event, and goes on only once the journal returns, so whatever a crash interrupts, everything before it
is stored. The service's journal is the store (`service.workers`), the job process's journal is its pipe
to the service, and the CLI and tests use `MemoryJournal`.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from service.domain import Round, SkippedStep
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
        self.log: list[Round | JobEvent] = []  # rounds and events in the order they were written

    async def record_round(self, round_: Round, /) -> None:
        """Keep a snapshot (the engine goes on changing its own copy)."""
        snapshot = msgspec.structs.replace(round_)
        self.rounds[round_.index] = snapshot
        self.entries.append(snapshot)
        self.log.append(snapshot)

    async def record_event(self, event: JobEvent, /) -> None:
        self.events.append(event)
        self.log.append(event)

    def history(self, before_round: int | None = None) -> list[Round]:
        """The rounds as a resumed job reads them back, in index order; with `before_round`, as the journal
        stood just before that round was first written (a restart at that moment)."""
        rounds: dict[int, Round] = {}
        for entry in self._until(before_round):
            if isinstance(entry, Round):
                rounds[entry.index] = entry
        return [rounds[i] for i in sorted(rounds)]

    def skipped(self, before_round: int | None = None) -> list[SkippedStep]:
        """The steps recorded as skipped, in order; with `before_round`, those recorded before it was first written."""
        return [SkippedStep(technique=e.technique or "", reason=e.message, line=e.line)
                for e in self._until(before_round) if isinstance(e, JobEvent) and e.kind == "step_skipped"]

    def _until(self, before_round: int | None) -> list[Round | JobEvent]:
        first = next((i for i, e in enumerate(self.log) if isinstance(e, Round) and e.index == before_round),
                     len(self.log))
        return self.log[:first]


class NullJournal:
    """Stores nothing (a job nobody will resume)."""

    async def record_round(self, round_: Round, /) -> None:
        return None

    async def record_event(self, event: JobEvent, /) -> None:
        return None
