"""Radix prefix cache over prompt blocks, with page size, LRU eviction, locks and a HiCache host tier.

Mirrors `mem_cache/radix_cache.py` (match_prefix, insert, evict leaves by last access, lock_ref on the
path of running requests) and `mem_cache/hiradix_cache.py` (device nodes backed up to a host pool: at
insert time under write_through, at eviction time under write_back; host hits loaded back before
prefill). Keys are prompt blocks instead of token ids, so one node holds a whole shared block.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence

from service.simulator.requests import UNIQUE_BASE


class Node:
    """One cached block (or the leading part of one)."""

    __slots__ = ("children", "parent", "key", "length", "lock", "last_access", "device", "host", "device_children",
                 "host_children")

    def __init__(self, parent: Node | None, key: int, length: int, now: float) -> None:
        self.children: dict[int, Node] = {}
        # Only the root has no parent, so a walk towards the root stops at `parent is None`.
        self.parent = parent
        self.key = key
        self.length = length
        self.lock = 0
        self.last_access = now
        self.device = True
        self.host = False
        self.device_children = 0
        self.host_children = 0


class Match:
    """What a prompt found in the cache: device tokens, host tokens to load back, and the deepest node."""

    __slots__ = ("device_tokens", "host_tokens", "node")

    def __init__(self, device_tokens: int, host_tokens: int, node: Node) -> None:
        self.device_tokens = device_tokens
        self.host_tokens = host_tokens
        self.node = node


class RadixCache:
    """Device KV held by finished or running prompts, shared by prefix; `enabled=False` is ChunkCache."""

    def __init__(self, *, page_size: int = 1, enabled: bool = True, host_capacity: int = 0,
                 write_policy: str = "write_through") -> None:
        self.page_size = max(page_size, 1)
        self.enabled = enabled
        self.root = Node(None, 0, 0, 0.0)
        self.root.lock = 1
        self.device_tokens = 0
        self.protected_tokens = 0
        self.host_capacity = host_capacity
        self.host_tokens = 0
        self.write_back = write_policy == "write_back"
        self.host_written_tokens = 0
        self.host_loaded_tokens = 0
        self._heap: list[tuple[float, int, Node]] = []
        self._host_heap: list[tuple[float, int, Node]] = []
        self._seq = itertools.count()
        self._output_keys = itertools.count(1)

    @property
    def evictable_tokens(self) -> int:
        return self.device_tokens - self.protected_tokens

    # -- matching -------------------------------------------------------------------------------------

    def match(self, blocks: Sequence[tuple[int, int]], now: float) -> Match:
        """Longest cached prefix, page aligned; host-tier tokens are returned to be loaded back."""
        node, device, host = self.root, 0, 0
        if not self.enabled:
            return Match(0, 0, node)
        for key, n in blocks:
            child = node.children.get(key)
            if child is None or not (child.device or child.host):
                break
            m = min(n, child.length)
            if child.device and host == 0:
                device += m
            else:
                host += m
            child.last_access = now
            node = child
            if m < n or m < child.length:
                break
        total = (device + host) // self.page_size * self.page_size
        device = min(device, total)
        return Match(device, total - device, node)

    def load_back(self, match: Match, now: float) -> int:
        """Bring a match's host nodes back to the device (`hiradix_cache.py` load_back); tokens moved."""
        moved, node, path = 0, match.node, []
        while (parent := node.parent) is not None and not node.device:
            path.append(node)
            node = parent
        for n in reversed(path):
            self._set_device(n, True, now)
            moved += n.length
        self.device_tokens += moved
        self.host_loaded_tokens += moved
        return moved

    # -- insertion ------------------------------------------------------------------------------------

    def insert(self, blocks: Sequence[tuple[int, int]], now: float) -> tuple[Node, int]:
        """Insert a computed prompt; returns its deepest node and how many tokens the tree gained."""
        node, added = self.root, 0
        if not self.enabled:
            return node, 0
        for key, n in blocks:
            child = node.children.get(key)
            if child is None:
                child = Node(node, key, n, now)
                node.children[key] = child
                node.device_children += 1
                added += n
                self._note_device(child, now)
            elif not child.device:
                self._set_device(child, True, now)
                added += child.length
            elif child.length < n and not child.children:
                added += n - child.length
                child.length = n
            child.last_access = now
            node = child
        self.device_tokens += added
        if not self.write_back:
            self._backup_path(node, now)
        return node, added

    def insert_output(self, node: Node, tokens: int, now: float) -> int:
        """Cache a finished request's generated tokens under its prompt (`cache_finished_req`)."""
        tokens = tokens // self.page_size * self.page_size
        if not self.enabled or tokens <= 0:
            return 0
        key = -next(self._output_keys) - UNIQUE_BASE
        child = Node(node, key, tokens, now)
        node.children[key] = child
        node.device_children += 1
        self.device_tokens += tokens
        self._note_device(child, now)
        if not self.write_back:
            self._backup_path(child, now)
        return tokens

    # -- locks ----------------------------------------------------------------------------------------

    def lock(self, node: Node) -> None:
        """Protect a running request's prefix from eviction (`inc_lock_ref`)."""
        while (parent := node.parent) is not None:
            if node.lock == 0 and node.device:
                self.protected_tokens += node.length
            node.lock += 1
            node = parent

    def unlock(self, node: Node, now: float) -> None:
        """Release a prefix (`dec_lock_ref`); unlocked leaves become evictable."""
        while (parent := node.parent) is not None:
            node.lock -= 1
            if node.lock == 0 and node.device:
                self.protected_tokens -= node.length
                node.last_access = max(node.last_access, now)
                if node.device_children == 0:
                    heapq.heappush(self._heap, (node.last_access, next(self._seq), node))
            node = parent

    # -- eviction -------------------------------------------------------------------------------------

    def evict(self, tokens: int, now: float) -> int:
        """Free at least `tokens` device tokens from unlocked leaves, least recently used first."""
        freed = 0
        while freed < tokens and self._heap:
            stamp, _, node = heapq.heappop(self._heap)
            if node.lock or not node.device or node.device_children or node.parent is None:
                continue
            if stamp != node.last_access:
                heapq.heappush(self._heap, (node.last_access, next(self._seq), node))
                continue
            freed += node.length
            self._drop_from_device(node, now)
        return freed

    def _drop_from_device(self, node: Node, now: float) -> None:
        parent = node.parent
        assert parent is not None
        self.device_tokens -= node.length
        if self.host_capacity and self.write_back and not node.host:
            self._backup(node, now)
        self._set_device(node, False, now)
        if not node.host:
            del parent.children[node.key]
        if parent is not self.root and parent.device_children == 0 and parent.lock == 0:
            heapq.heappush(self._heap, (parent.last_access, next(self._seq), parent))

    def _set_device(self, node: Node, on: bool, now: float) -> None:
        if node.device == on:
            return
        node.device = on
        parent = node.parent
        if parent is not None:
            parent.device_children += 1 if on else -1
        if on:
            if node.lock:
                self.protected_tokens += node.length
            self._note_device(node, now)

    def _note_device(self, node: Node, now: float) -> None:
        if node.lock == 0 and node.device_children == 0:
            heapq.heappush(self._heap, (node.last_access, next(self._seq), node))

    # -- host tier ------------------------------------------------------------------------------------

    def _backup_path(self, node: Node, now: float) -> None:
        if not self.host_capacity:
            return
        path = []
        while (parent := node.parent) is not None and not node.host:
            path.append(node)
            node = parent
        for n in reversed(path):
            if not self._backup(n, now):
                return

    def _backup(self, node: Node, now: float) -> bool:
        if node.length > self.host_capacity:
            return False
        if self.host_tokens + node.length > self.host_capacity:
            self._evict_host(self.host_tokens + node.length - self.host_capacity)
        if self.host_tokens + node.length > self.host_capacity:
            return False
        node.host = True
        self.host_tokens += node.length
        self.host_written_tokens += node.length
        if node.parent is not None:
            node.parent.host_children += 1
        heapq.heappush(self._host_heap, (now, next(self._seq), node))
        return True

    def _evict_host(self, tokens: int) -> None:
        """Host pool LRU over nodes no longer on the device (`hiradix_cache.py` evict_host)."""
        freed, skipped = 0, []
        while freed < tokens and self._host_heap:
            item = heapq.heappop(self._host_heap)
            node = item[2]
            if not node.host:
                continue
            if node.device or node.host_children or node.lock:
                skipped.append(item)
                continue
            node.host = False
            self.host_tokens -= node.length
            freed += node.length
            parent = node.parent
            if parent is not None:
                parent.host_children -= 1
                if not node.device:
                    parent.children.pop(node.key, None)
        for item in skipped:
            heapq.heappush(self._host_heap, item)
