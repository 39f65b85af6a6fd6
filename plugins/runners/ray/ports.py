"""Listener ports handed out to the rounds of one runner, per node address, until each round ends.

Rounds run concurrently from one event loop, and several Ray nodes may share one address (a cluster on
one host), so a port probed free for one round is held here until that round's teardown: the next round
asks its actors for ports outside this set. The lock makes probing and holding one step.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict


class PortBook:
    """Ports held by live rounds, by node address."""

    def __init__(self) -> None:
        self.held: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
        self._lock: asyncio.Lock | None = None

    @property
    def lock(self) -> asyncio.Lock:
        """Held while a round probes and takes its ports (created on the running loop)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def taken(self, ip: str) -> list[int]:
        """Every port a live round holds on `ip`."""
        return sorted(port for ports in self.held[ip].values() for port in ports)

    def hold(self, round_id: str, ip: str, ports: list[int]) -> None:
        """Record `ports` on `ip` as the round's."""
        self.held[ip][round_id].update(ports)

    def release(self, round_id: str) -> None:
        """Give back every port of the round."""
        for rounds in self.held.values():
            rounds.pop(round_id, None)
