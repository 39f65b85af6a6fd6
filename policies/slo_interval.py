"""SLO percentiles judged on the pooled requests of every repeat, with a distribution-free interval.

A percentile target (p95 TTFT under 600 ms) is a statement about the request distribution, not about one
run: the requests of every repeat are pooled, the percentile is read from them as bench_serving reads it
(`np.percentile`, linear), and the order statistics whose ranks bracket the quantile with binomial
probability at least the confidence level give the interval. The bound holds for any continuous
distribution (no bootstrap, no shape assumed). A target is **met** when the upper bound is under it,
**missed** when the lower bound is over it, and **within noise** otherwise: then more seeds can settle it.

Figures without per-request samples (ITL targets: bench_serving keeps no per-gap samples; a runner that
reports none) are judged on the mean of the per-repeat figures with a Student t interval over repeats.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import StrEnum

import msgspec
import numpy as np
from scipy import stats

from policies.noise import t_critical
from service import SLO, SLO_TARGETS, RoundResult, SLOCheck

# SLO target -> (per-request samples, quantile, label, bench figure per repeat).
SAMPLED_TARGETS: dict[str, tuple[str, float, str, str]] = {
    "ttft_median_ms": ("ttft_ms", 0.50, "median TTFT", "median_ttft_ms"),
    "ttft_p95_ms": ("ttft_ms", 0.95, "p95 TTFT", "p95_ttft_ms"),
    "ttft_p99_ms": ("ttft_ms", 0.99, "p99 TTFT", "p99_ttft_ms"),
    "e2e_p95_ms": ("e2e_ms", 0.95, "p95 E2E latency", "p95_e2e_latency_ms"),
}
# Percentile targets whose samples no runner keeps: judged over repeats.
REPEAT_TARGETS: dict[str, tuple[str, str]] = {
    "itl_median_ms": ("median ITL", "median_itl_ms"),
    "itl_p99_ms": ("p99 ITL", "p99_itl_ms"),
}
PERCENTILE_TARGETS = (*SAMPLED_TARGETS, *REPEAT_TARGETS)


class Reading(StrEnum):
    """Where a target stands once noise is counted."""

    MET = "met"
    MISSED = "missed"
    WITHIN_NOISE = "within noise"


class SLOJudgement(msgspec.Struct, frozen=True, kw_only=True):
    """One percentile target judged on one side's repeats.

    `low`/`high` is the interval (None when it cannot be bounded: too few requests beyond the quantile,
    or one repeat without samples); `requests` is 0 when the judgement is over repeats, not requests.
    """

    name: str
    label: str
    target: float
    point: float | None
    low: float | None
    high: float | None
    repeats: int
    requests: int

    @property
    def reading(self) -> Reading:
        """Met when the whole interval is under the target, missed when all of it is over, else within noise.

        Without any interval (one repeat, no samples) the point estimate is all there is: it decides.
        """
        if self.point is None:
            return Reading.MISSED
        if self.low is None and self.high is None and self.requests == 0:
            return Reading.MET if self.point <= self.target else Reading.MISSED
        if self.high is not None and self.high <= self.target:
            return Reading.MET
        if self.low is not None and self.low > self.target:
            return Reading.MISSED
        return Reading.WITHIN_NOISE

    @property
    def point_met(self) -> bool:
        """Whether the point estimate meets the target (what decides once seeds run out)."""
        return self.point is not None and self.point <= self.target

    def check(self) -> SLOCheck:
        """The SLO check the decision and the report carry: the pooled figure, met on the point estimate."""
        return SLOCheck(name=self.name, target=self.target, actual=self.point, met=self.point_met)


def binomial_cdf(n: int, q: float) -> np.ndarray:
    """P(Binomial(n, q) <= k) for k = 0..n."""
    return np.asarray(stats.binom.cdf(np.arange(n + 1), n, q), dtype=float)


def order_statistic_ranks(n: int, q: float, confidence: float) -> tuple[int | None, int | None]:
    """1-based ranks (l, u) with P(X(l) <= quantile q <= X(u)) >= `confidence` for n continuous samples.

    P(X(l) > quantile) = P(Bin(n, q) < l) = F(l - 1) and P(X(u) < quantile) = 1 - F(u - 1): each tail is
    held to (1 - confidence) / 2. A rank is None when no sample is far enough out (a p99 from 100 requests
    has no upper bound: the 100th request is below the true p99 more often than the tail allows).
    """
    if n < 1 or not 0.0 < q < 1.0:
        return None, None
    tail = (1.0 - confidence) / 2.0
    cdf = binomial_cdf(n, q)
    low_count = int(np.searchsorted(cdf, tail, side="right"))  # how many k have F(k) <= tail
    high_index = int(np.searchsorted(cdf, 1.0 - tail, side="left"))  # the first k with F(k) >= 1 - tail
    low = low_count if low_count >= 1 else None
    high = high_index + 1 if high_index + 1 <= n else None
    return low, high


def quantile_interval(samples: np.ndarray, q: float, confidence: float) -> tuple[float, float | None, float | None]:
    """(point estimate, lower bound, upper bound) of quantile q of `samples`; a bound is None when unbounded."""
    ordered = np.sort(np.asarray(samples, dtype=float))
    low, high = order_statistic_ranks(len(ordered), q, confidence)
    point = float(np.quantile(ordered, q))
    return (point, None if low is None else float(ordered[low - 1]),
            None if high is None else float(ordered[high - 1]))


def _sampled(name: str, target: float, results: Sequence[RoundResult], confidence: float) -> SLOJudgement | None:
    field, q, label, _key = SAMPLED_TARGETS[name]
    arrays = [np.asarray(getattr(r.samples, field), dtype=float) for r in results]
    if any(len(a) == 0 for a in arrays):
        return None  # a repeat without samples: judge over repeats instead
    pooled = np.concatenate(arrays)
    point, low, high = quantile_interval(pooled, q, confidence)
    return SLOJudgement(name=name, label=label, target=target, point=point, low=low, high=high,
                        repeats=len(results), requests=len(pooled))


def _over_repeats(name: str, label: str, key: str, target: float, results: Sequence[RoundResult],
                  confidence: float) -> SLOJudgement:
    # Sorted first so the mean and spread do not depend on the order the repeats came in.
    values = sorted(float(getattr(r.bench, key)) for r in results)
    if not values or min(values) <= 0:  # a latency of 0 is "not reported", which never meets a target
        return SLOJudgement(name=name, label=label, target=target, point=None, low=None, high=None,
                            repeats=len(results), requests=0)
    point = math.fsum(values) / len(values)
    if len(values) < 2:
        return SLOJudgement(name=name, label=label, target=target, point=point, low=None, high=None,
                            repeats=1, requests=0)
    sd = math.sqrt(math.fsum((v - point) ** 2 for v in values) / (len(values) - 1))
    half = t_critical(len(values) - 1, 1.0 - confidence) * sd / math.sqrt(len(values))
    return SLOJudgement(name=name, label=label, target=target, point=point, low=point - half,
                        high=point + half, repeats=len(values), requests=0)


def judge_percentiles(results: Sequence[RoundResult], slo: SLO, confidence: float) -> dict[str, SLOJudgement]:
    """Every percentile target the SLO sets, judged on the side's repeats (see the module docstring)."""
    out: dict[str, SLOJudgement] = {}
    for name in SLO_TARGETS:
        target = getattr(slo, name)
        if target is None or name not in PERCENTILE_TARGETS:
            continue
        judged = _sampled(name, float(target), results, confidence) if name in SAMPLED_TARGETS else None
        if judged is None:
            label, key = REPEAT_TARGETS.get(name) or (SAMPLED_TARGETS[name][2], SAMPLED_TARGETS[name][3])
            judged = _over_repeats(name, label, key, float(target), results, confidence)
        out[name] = judged
    return out


def judged_checks(checks: list[SLOCheck], judged: dict[str, SLOJudgement]) -> list[SLOCheck]:
    """The mean-based checks with every percentile target replaced by its pooled judgement (order kept)."""
    return [judged[c.name].check() if c.name in judged else c for c in checks]


def _ms(value: float | None) -> str:
    if value is None:
        return "unbounded"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"


def judgement_text(j: SLOJudgement) -> str:
    """"p95 TTFT 612 ms [571, 655] over 3 repeats, 1,500 requests, against 600 ms: within noise"."""
    if j.point is None:
        return f"{j.label} not reported over {j.repeats} repeats, against {_ms(j.target)} ms: missed"
    repeats = f"{j.repeats} repeat" + ("s" if j.repeats != 1 else "")
    if j.requests:
        where = f"over {repeats}, {j.requests:,} requests"
    elif j.low is None:
        where = f"over {repeats}, no interval from a single repeat"
    else:
        where = f"over {repeats} (spread of the per-repeat figures)"
    interval = "" if j.low is None and j.high is None and not j.requests else f" [{_ms(j.low)}, {_ms(j.high)}]"
    return f"{j.label} {_ms(j.point)} ms{interval} {where}, against {_ms(j.target)} ms: {j.reading.value}"
