"""Length percentiles as the casebook computes them, and concurrency and request rate from timestamps."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def casebook_median(values: Sequence[int]) -> float:
    """`statistics.median`, as profile_workload.py uses (the mean of the two middle values when even)."""
    return float(statistics.median(values))


def casebook_p95(values: Sequence[int]) -> int:
    """profile_workload.py's p95: `sorted(values)[int(len(values) * 0.95)]`."""
    return sorted(values)[int(len(values) * 0.95)]


def peak_concurrency(intervals: Sequence[tuple[float, float]]) -> int:
    """Most requests in flight at once; a request ending at the instant another starts does not overlap it."""
    events = sorted([(end, -1) for _, end in intervals] + [(start, 1) for start, _ in intervals])
    running = peak = 0
    for _, change in events:
        running += change
        peak = max(peak, running)
    return peak


def request_rates(starts: Sequence[float]) -> tuple[float, float]:
    """Mean and peak requests per 1-second window.

    Windows are consecutive seconds from the first arrival; the mean divides the requests by the number of
    windows up to the last arrival.
    """
    first = min(starts)
    counts: dict[int, int] = {}
    for start in starts:
        window = math.floor(start - first)
        counts[window] = counts.get(window, 0) + 1
    windows = max(counts) + 1
    return len(starts) / windows, float(max(counts.values()))
