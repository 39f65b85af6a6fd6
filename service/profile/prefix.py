"""Prefix reuse of a request log: the casebook's sorted-adjacent sharing rate and an exact radix-cache replay.

Token sequences are compared as big-endian uint32 byte strings, whose byte order is the order of the id
lists, so sorting uses memcmp rather than element-by-element comparison.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

import numpy as np

TokenIds = np.ndarray


def sort_key(ids: TokenIds) -> bytes:
    """A byte string that sorts like the token id list."""
    return ids.astype(">u4", copy=False).tobytes()


def common_prefix_tokens(a: bytes, b: bytes) -> int:
    """Length in tokens of the common prefix of two sort keys."""
    if len(a) <= len(b) and b.startswith(a):
        return len(a) // 4
    if len(b) < len(a) and a.startswith(b):
        return len(b) // 4
    n = min(len(a), len(b))
    # Equality ignores byte order, so compare bytes and round down to the token holding the first mismatch.
    return int((np.frombuffer(a, dtype=np.uint8, count=n) != np.frombuffer(b, dtype=np.uint8, count=n)).argmax()) // 4


def sharing_rate(prompts: Sequence[TokenIds]) -> float:
    """The casebook's prefix sharing rate (profile_workload.py).

    Sort the token sequences, sum the common prefix lengths of adjacent pairs, divide by the total input
    tokens.
    """
    total = sum(len(p) for p in prompts)
    if total == 0:
        return 0.0
    keys = sorted(sort_key(p) for p in prompts)
    shared = sum(common_prefix_tokens(a, b) for a, b in zip(keys, keys[1:], strict=False))
    return shared / total


def prefix_rates(prompts: Sequence[TokenIds], completions: Sequence[TokenIds] | None = None,
                 page_size: int = 1) -> tuple[float, float]:
    """`sharing_rate` and `radix_reuse_rate` together, from one sort of the log's sequences."""
    total = sum(len(p) for p in prompts)
    if total == 0:
        return 0.0, 0.0
    replay = _RadixReplay(prompts, completions)
    return replay.shared_adjacent() / total, _served(prompts, replay.matches(), page_size) / total


def radix_reuse_rate(prompts: Sequence[TokenIds], completions: Sequence[TokenIds] | None = None,
                     page_size: int = 1) -> float:
    """Share of input tokens a radix cache that never evicts would serve from cache, replaying the log in order.

    Each request matches the longest prefix held by any earlier request. As in SGLang, a finished request
    leaves its prompt and its output in the tree (`srt/mem_cache/radix_cache.py`, cache_finished_req), at
    least one prompt token is always computed (`srt/managers/schedule_batch.py`, max_prefix_len =
    input_len - 1), and matches count whole pages only.

    Args:
        prompts: Prompt token ids in log order.
        completions: Output token ids per request; None leaves outputs out of the cache.
        page_size: `--page-size` of the server.

    Returns:
        Sum of matched prefix lengths over total input tokens.
    """
    total = sum(len(p) for p in prompts)
    if total == 0:
        return 0.0
    return _served(prompts, longest_earlier_matches(prompts, completions), page_size) / total


def _served(prompts: Sequence[TokenIds], matches: list[int], page_size: int) -> int:
    served = 0
    for prompt, match in zip(prompts, matches, strict=True):
        usable = min(match, len(prompt) - 1) if len(prompt) else 0
        served += usable // page_size * page_size
    return served


def longest_earlier_matches(prompts: Sequence[TokenIds], completions: Sequence[TokenIds] | None = None) -> list[int]:
    """For each prompt, the longest common prefix with any earlier request's cached sequence.

    Sorting queries (prompts) and cache entries (prompt + output) together turns "longest prefix among
    earlier entries" into "nearest earlier entry on either side in sorted order", found in one pass each way
    with a stack of non-dominated entries: O(n log n) overall, never pairwise.
    """
    return _RadixReplay(prompts, completions).matches()


class _RadixReplay:
    """Queries (prompts) and cache entries (prompt + output) in one sorted order, with adjacent common prefixes."""

    def __init__(self, prompts: Sequence[TokenIds], completions: Sequence[TokenIds] | None) -> None:
        n = len(prompts)
        keys = [sort_key(p) for p in prompts]
        if completions is None:
            entry_keys = keys
        else:
            entry_keys = [k + sort_key(c) if len(c) else k for k, c in zip(keys, completions, strict=True)]
        # item = (key, is_query, request), sorted; an entry sorts before an equal query, which changes
        # nothing. Entries come first in `everything`, so a stable sort on the key alone gives that order.
        everything = entry_keys + keys
        order = sorted(range(2 * n), key=everything.__getitem__)
        self.n = n
        self.items = [(everything[i], int(i >= n), i % n) for i in order]
        items = self.items
        self.adjacent = [0] + [common_prefix_tokens(items[i - 1][0], items[i][0]) for i in range(1, 2 * n)]

    def matches(self) -> list[int]:
        """Each prompt's longest common prefix with an earlier request's entry."""
        best = [0] * self.n
        size = len(self.items)
        _sweep(self.items, self.adjacent, range(size), best, step=1)
        _sweep(self.items, self.adjacent, range(size - 1, -1, -1), best, step=-1)
        return best

    def shared_adjacent(self) -> int:
        """The sorted-adjacent sum of `sharing_rate`, read off the merged order.

        In lexicographic order, two prompts' common prefix is the least common prefix of the neighbours
        between them, entries included.
        """
        queries = np.flatnonzero(np.fromiter((q for _, q, _ in self.items), dtype=np.int8, count=len(self.items)))
        if len(queries) < 2:
            return 0
        adjacent = np.asarray(self.adjacent[:queries[-1] + 1], dtype=np.int64)
        return int(np.minimum.reduceat(adjacent, queries[:-1] + 1).sum())


def _sweep(items: list[tuple[bytes, int, int]], adjacent: list[int], order: range, best: list[int],
           step: int) -> None:
    # Stack of candidate entries, bottom to top: times (request indices) and common-prefix lengths with the
    # current position both strictly increase. A lower entry with a later time is dominated by an upper one
    # (closer, so at least as long a match, and available to every query the lower one serves).
    times: list[int] = []
    lcps: list[int] = []
    first = True
    for pos in order:
        if not first:
            link = adjacent[pos] if step == 1 else adjacent[pos + 1]
            _clip(times, lcps, link)
        first = False
        key, is_query, request = items[pos]
        if is_query:
            depth = bisect_left(times, request) - 1
            if depth >= 0 and lcps[depth] > best[request]:
                best[request] = lcps[depth]
        else:
            while times and times[-1] > request:
                times.pop()
                lcps.pop()
            length = len(key) // 4
            if not lcps or lcps[-1] < length:
                times.append(request)
                lcps.append(length)


def _clip(times: list[int], lcps: list[int], link: int) -> None:
    """Moving one position on caps every match at `link`; entries clipped to the same value merge."""
    earliest = None
    while lcps and lcps[-1] >= link:
        earliest = times.pop()
        lcps.pop()
    if earliest is not None:
        times.append(earliest)
        lcps.append(link)
