"""The running batch as slot arrays, so a decode step is a few numpy operations however large the batch.

Also the recorder of what the benchmark client sees: inter-token latencies as (value, weight) pairs (one
pair per group of requests that share a gap, the way bench_serving splits a multi-token chunk into
`(now - prev) / num_new` per token, `benchmark/serving.py`), and time-weighted server gauges.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from service.simulator.requests import SimRequest


@dataclass
class Recorder:
    """Client-side latency samples and server-side gauges of the measured phase."""

    measuring: bool = False
    itl_values: list[float] = field(default_factory=list)
    itl_weights: list[int] = field(default_factory=list)
    itl_groups: list[tuple[float, np.ndarray | int]] = field(default_factory=list)
    max_itl: float = 0.0
    gauge_time: float = 0.0
    usage_area: float = 0.0
    running_area: float = 0.0
    queue_area: float = 0.0
    input_tokens: int = 0
    cached_tokens: int = 0
    host_tokens: int = 0
    retractions: int = 0
    spec_steps: int = 0
    spec_emitted: int = 0
    spec_proposed: int = 0
    steps: int = 0

    def itl_group(self, gap: float, emitted: np.ndarray | int) -> None:
        """A decode step's gap shared by a cohort: `emitted` tokens each (an array) or one token each (a count)."""
        if self.measuring:
            self.itl_groups.append((gap, emitted))

    def itl(self, value: float, weight: int) -> None:
        if self.measuring and weight > 0:
            self.itl_values.append(value)
            self.itl_weights.append(weight)
            if value > self.max_itl:
                self.max_itl = value

    def itl_samples(self) -> tuple[np.ndarray, np.ndarray]:
        """Every recorded gap as (seconds per token, tokens), individual and cohort ones together."""
        values, weights = [np.asarray(self.itl_values, dtype=float)], [np.asarray(self.itl_weights, dtype=float)]
        counts = [g for g in self.itl_groups if isinstance(g[1], int)]
        if counts:
            values.append(np.array([gap for gap, _ in counts]))
            weights.append(np.array([float(c) for _, c in counts]))
        arrays = [(gap, a) for gap, a in self.itl_groups if not isinstance(a, int) and len(a)]
        if arrays:
            emitted = np.concatenate([a for _, a in arrays]).astype(float)
            gaps = np.repeat([gap for gap, _ in arrays], [len(a) for _, a in arrays])
            values.append(gaps / emitted)
            weights.append(emitted)
        return np.concatenate(values), np.concatenate(weights)

    def gauges(self, dt: float, usage: float, running: int, queued: int) -> None:
        if self.measuring and dt > 0:
            self.gauge_time += dt
            self.usage_area += usage * dt
            self.running_area += running * dt
            self.queue_area += queued * dt


class RunningBatch:
    """Requests that have their first token and are decoding, in fixed slots.

    Generated and context lengths are stored relative to `tick`, the count of uniform decode steps (one token
    for every running request), so such a step is O(1) plus the requests it finishes, found on a heap of
    finishing ticks: a round runs thousands of steps over small batches, where per-request array work would
    dominate. Speculative steps (`advance`) add varying tokens per request with array operations.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._gen = np.zeros(capacity, dtype=np.int64)
        self._ctx = np.zeros(capacity, dtype=np.int64)
        self.target = np.zeros(capacity, dtype=np.int64)
        self.max_new = np.zeros(capacity, dtype=np.int64)
        self.fresh = np.zeros(capacity, dtype=bool)
        self.occupied = np.zeros(capacity, dtype=bool)
        self.reqs: list[SimRequest | None] = [None] * capacity
        self._free = list(range(capacity - 1, -1, -1))
        self._idx = np.zeros(0, dtype=np.int64)
        self._dirty = False
        self._serial = [0] * capacity
        self._finishing: list[tuple[int, int, int]] = []
        self.tick = 0
        self.fresh_count = 0
        self.size = 0
        self.ctx_sum = 0

    @property
    def gen(self) -> np.ndarray:
        """Tokens generated so far, per slot (meaningful for occupied slots)."""
        return self._gen + self.tick

    @property
    def ctx(self) -> np.ndarray:
        """Context tokens (prompt plus generated), per slot."""
        return self._ctx + self.tick

    def generated(self, slot: int) -> int:
        """Tokens generated so far by the request in `slot`."""
        return int(self._gen[slot]) + self.tick

    def add(self, req: SimRequest) -> None:
        slot = self._free.pop()
        req.slot = slot
        self.reqs[slot] = req
        self._gen[slot] = req.generated - self.tick
        self.target[slot] = req.output_len
        self.max_new[slot] = req.max_new_tokens
        self._ctx[slot] = req.input_len + req.generated - self.tick
        self.fresh[slot] = True
        self.fresh_count += 1
        self.occupied[slot] = True
        self._serial[slot] += 1
        heapq.heappush(self._finishing, (req.output_len - req.generated + self.tick, self._serial[slot], slot))
        self.size += 1
        self.ctx_sum += req.input_len + req.generated
        self._dirty = True

    def remove(self, req: SimRequest) -> None:
        slot = req.slot
        req.generated = self.generated(slot)
        self.ctx_sum -= int(self._ctx[slot]) + self.tick
        if self.fresh[slot]:
            self.fresh[slot] = False
            self.fresh_count -= 1
        self.reqs[slot] = None
        self.occupied[slot] = False
        self._free.append(slot)
        req.slot = -1
        self.size -= 1
        self._dirty = True

    def indices(self) -> np.ndarray:
        if self._dirty:
            self._idx = np.flatnonzero(self.occupied)
            self._dirty = False
        return self._idx

    def clear_fresh(self, idx: np.ndarray) -> None:
        """Mark every running request as having had its first decode gap recorded."""
        self.fresh[idx] = False
        self.fresh_count = 0

    def reserved_tokens(self, clip: int, ratio: float) -> float:
        """KV the scheduler keeps for running requests' future tokens (`_get_running_request_total_token_offset`)."""
        idx = self.indices()
        if not len(idx):
            return 0.0
        left = self.max_new[idx] - self._gen[idx] - self.tick
        return float(np.maximum(np.minimum(left, clip), 0).sum() * ratio)

    def advance_one(self) -> list[int]:
        """One token for every running request; returns the slots that reached their output length."""
        self.tick += 1
        self.ctx_sum += self.size
        done: list[int] = []
        heap = self._finishing
        while heap and heap[0][0] <= self.tick:
            _, serial, slot = heapq.heappop(heap)
            if self.occupied[slot] and self._serial[slot] == serial:
                done.append(slot)
        return done

    def advance(self, emitted: np.ndarray) -> np.ndarray:
        """Add each request's emitted tokens; returns the slots that reached their output length."""
        idx = self.indices()
        emitted = np.minimum(emitted, self.target[idx] - self._gen[idx] - self.tick)
        self._gen[idx] += emitted
        self._ctx[idx] += emitted
        self.ctx_sum += int(emitted.sum())
        if len(self._finishing) > 4 * self.capacity:
            self._finishing.clear()  # speculative batches finish early; their uniform-step ticks are unused
        finished: np.ndarray = idx[self._gen[idx] + self.tick >= self.target[idx]]
        return finished
