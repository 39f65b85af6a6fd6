"""Router policies over simulated workers (sgl-model-gateway `src/policies/*.rs`, router 0.3.2; SMG's
prefix_hash and least_load are in `smg_policies`).

cache_aware keeps an approximate prefix tree of the text each worker was sent. When loads are balanced it
sends a request to the worker with the longest match if the match rate exceeds `--cache-threshold`
(default 0.3), else to the worker with the smallest tree; when `(max - min) > --balance-abs-threshold`
(64) and `max > min * --balance-rel-threshold` (1.5) it sends to the least-loaded worker
(`cache_aware.rs`). Load is the router's own count of in-flight requests per worker.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from service.domain import RouterConfig
from service.simulator.smg_policies import LeastLoad, PrefixHash, Probe

CACHE_THRESHOLD, BALANCE_ABS, BALANCE_REL = 0.3, 64, 1.5


class _TreeNode:
    __slots__ = ("children", "length", "tenants")

    def __init__(self, length: int) -> None:
        self.children: dict[int, _TreeNode] = {}
        self.length = length
        self.tenants: set[int] = set()


class ApproximateTree:
    """The router's prefix tree over request text (blocks stand for their characters)."""

    def __init__(self, workers: int) -> None:
        self.root = _TreeNode(0)
        self.sizes = [0] * workers

    def match(self, blocks: Sequence[tuple[int, int]]) -> tuple[int, set[int]]:
        """Longest matched length and the workers that hold it."""
        node, matched, tenants = self.root, 0, set()
        for key, n in blocks:
            child = node.children.get(key)
            if child is None:
                break
            matched += min(n, child.length)
            tenants = child.tenants
            node = child
            if n != child.length:
                break
        return matched, tenants

    def insert(self, blocks: Sequence[tuple[int, int]], worker: int) -> None:
        node = self.root
        for key, n in blocks:
            child = node.children.get(key)
            if child is None:
                child = _TreeNode(n)
                node.children[key] = child
            elif child.length < n:
                child.length = n
            if worker not in child.tenants:
                child.tenants.add(worker)
                self.sizes[worker] += n
            node = child


class Router:
    """Picks a worker index for each request."""

    def __init__(self, policy: str, workers: int, config: RouterConfig | None, rng: np.random.Generator) -> None:
        self.policy = policy
        self.workers = workers
        self.rng = rng
        self.next = 0
        self.inflight = [0] * workers
        self.tree = ApproximateTree(workers) if policy == "cache_aware" else None
        cfg = config or RouterConfig()
        self.cache_threshold = cfg.cache_threshold if cfg.cache_threshold is not None else CACHE_THRESHOLD
        self.abs = cfg.balance_abs_threshold if cfg.balance_abs_threshold is not None else BALANCE_ABS
        self.rel = cfg.balance_rel_threshold if cfg.balance_rel_threshold is not None else BALANCE_REL
        self.prefix_hash = PrefixHash(workers, cfg.extra) if policy == "prefix_hash" and workers else None
        self.least_load = LeastLoad(workers, rng, cfg.extra) if policy == "least_load" and workers else None

    def watch(self, probe: Probe) -> None:
        """Where least_load polls each worker's waiting requests and KV usage."""
        if self.least_load is not None:
            self.least_load.probe = probe

    def pick(self, blocks: Sequence[tuple[int, int]], now: float = 0.0) -> int:
        """The worker for a request at simulated time `now`, counted in flight until `done`."""
        if self.workers == 1:
            choice = 0
        elif self.prefix_hash is not None:
            choice = self.prefix_hash.pick(blocks, self.inflight)
        elif self.least_load is not None:
            choice = self.least_load.pick(self.inflight, now)
        elif self.policy == "round_robin":
            choice, self.next = self.next, (self.next + 1) % self.workers
        elif self.policy == "random":
            choice = int(self.rng.integers(self.workers))
        elif self.policy == "power_of_two":
            a, b = self.rng.choice(self.workers, size=2, replace=False)
            choice = int(a if self.inflight[a] <= self.inflight[b] else b)
        else:
            choice = self._cache_aware(blocks)
        self.inflight[choice] += 1
        return choice

    def done(self, worker: int) -> None:
        self.inflight[worker] -= 1

    def _cache_aware(self, blocks: Sequence[tuple[int, int]]) -> int:
        assert self.tree is not None
        lo, hi = min(self.inflight), max(self.inflight)
        if hi - lo > self.abs and hi > lo * self.rel:
            choice = int(np.argmin(self.inflight))
        else:
            total = sum(n for _, n in blocks) or 1
            matched, tenants = self.tree.match(blocks)
            if tenants and matched / total > self.cache_threshold:
                choice = min(tenants, key=lambda w: (self.inflight[w], w))
            else:
                choice = int(np.argmin(self.tree.sizes))
        self.tree.insert(blocks, choice)
        return choice
