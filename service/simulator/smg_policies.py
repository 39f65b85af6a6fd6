"""SMG's (sgl-model-gateway) prefix_hash and least_load policies over simulated workers.

prefix_hash (`model_gateway/src/policies/prefix_hash.rs`): hash the first `--prefix-token-count` tokens
(256) of a request onto a consistent-hash ring of the workers. The ring's worker keeps the request unless it
is overloaded: its load (the router's in-flight count) above both `avg * --prefix-hash-load-factor` (1.25)
and `avg + --prefix-hash-balance-abs-threshold` (10), where `avg = (total + 1) / workers`. An overloaded
target gives way to the least-loaded worker that is not overloaded, or keeps the request when every worker
is. There is no tree to update: a prefix goes where its hash says, so shared prefixes meet on one worker
without cache_aware's per-request tree walk and insert.

least_load (`model_gateway/src/policies/least_load.rs`): every `--load-monitor-interval` seconds (10) the
router polls each worker's load (`/v1/loads`, else SGLang's `/metrics` gauges `num_queue_reqs`,
`token_usage`, `gen_throughput`) and sends each request to the worker with the lowest

    (waiting_reqs * p + dispatched_since_poll * p) / throughput + kv_weight * k / (1 - k)

with `p` = `--least-load-mean-prefill-tokens` (1024, the HTTP path knows no token count), `kv_weight` =
`--least-load-kv-pressure-weight` (0.15 s) and `k` the polled KV usage (clamped to 0.999); ties are broken
uniformly at random. Before the first poll it joins the shortest queue of in-flight requests. The simulator
divides by `--least-load-default-throughput` (2000 tokens/s, what SMG uses when a worker reports none):
replicas of one group drain at the same rate, so the ranking is the same as with their live figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from service.domain import FlagValue

# A worker's polled load: (waiting requests, KV usage 0..1).
Probe = Callable[[int], tuple[int, float]]


def _setting(extra: Mapping[str, FlagValue], flag: str, default: float) -> float:
    value = extra.get(flag)
    return float(value) if isinstance(value, int | float | str) and not isinstance(value, bool) else default


@dataclass
class PrefixHash:
    """prefix_hash over `workers` workers; `pick` takes the request's blocks and the in-flight counts."""

    workers: int
    extra: Mapping[str, FlagValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.prefix_tokens = int(_setting(self.extra, "--prefix-token-count", 256))
        self.load_factor = _setting(self.extra, "--prefix-hash-load-factor", 1.25)
        self.abs_threshold = _setting(self.extra, "--prefix-hash-balance-abs-threshold", 10)

    def target(self, blocks: Sequence[tuple[int, int]]) -> int:
        """The ring's worker for the request's first `prefix_tokens` tokens (a stable hash of them)."""
        key: list[int] = []
        left = self.prefix_tokens
        for block, n in blocks:
            if left <= 0:
                break
            key += [block, min(n, left)]
            left -= n
        digest = hash(tuple(key)) & 0xFFFFFFFFFFFFFFFF  # int tuples hash the same in every process
        return int((digest * 0x9E3779B97F4A7C15 & 0xFFFFFFFFFFFFFFFF) % self.workers)

    def pick(self, blocks: Sequence[tuple[int, int]], inflight: Sequence[int]) -> int:
        total = sum(inflight)
        avg = (total + 1) / self.workers
        threshold = max(avg * self.load_factor, avg + self.abs_threshold)

        def ok(worker: int) -> bool:
            return total == 0 or inflight[worker] <= threshold

        target = self.target(blocks) if blocks else int(np.argmin(inflight))
        if ok(target):
            return target
        acceptable = [w for w in range(self.workers) if ok(w)]
        return min(acceptable, key=lambda w: inflight[w]) if acceptable else target


@dataclass
class LeastLoad:
    """least_load over `workers` workers, polling `probe` every `interval` simulated seconds."""

    workers: int
    rng: np.random.Generator
    extra: Mapping[str, FlagValue] = field(default_factory=dict)
    probe: Probe | None = None

    def __post_init__(self) -> None:
        self.interval = _setting(self.extra, "--load-monitor-interval", 10)
        self.kv_weight = _setting(self.extra, "--least-load-kv-pressure-weight", 0.15)
        self.mean_prefill = max(1.0, _setting(self.extra, "--least-load-mean-prefill-tokens", 1024))
        self.throughput = _setting(self.extra, "--least-load-default-throughput", 2000.0) or 2000.0
        self.polled: list[tuple[int, float]] | None = None
        self.next_poll = 0.0
        self.since_poll = [0] * self.workers

    def _poll(self, now: float) -> None:
        if self.probe is None or now < self.next_poll:
            return
        self.polled = [self.probe(w) for w in range(self.workers)]
        self.since_poll = [0] * self.workers
        self.next_poll = now + self.interval if self.interval > 0 else math.inf

    def score(self, worker: int, inflight: Sequence[int]) -> float:
        if self.polled is None:
            return float(inflight[worker])  # the whole fleet dark: join the shortest queue
        waiting, usage = self.polled[worker]
        k = min(max(usage, 0.0), 0.999)
        work = (waiting + self.since_poll[worker]) * self.mean_prefill
        return work / self.throughput + self.kv_weight * k / (1 - k)

    def pick(self, inflight: Sequence[int], now: float) -> int:
        self._poll(now)
        scores = [self.score(w, inflight) for w in range(self.workers)]
        best = min(scores)
        tied = [w for w, s in enumerate(scores) if s == best]
        choice = tied[0] if len(tied) == 1 else int(tied[int(self.rng.integers(len(tied)))])
        self.since_poll[choice] += 1
        return choice
