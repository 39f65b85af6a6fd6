"""Measured noise: block bootstrap of per-request samples, Welch's t over repeats, proportion tests.

Everything here is deterministic: the bootstrap draws from a generator seeded by the policy settings, the
side (baseline or candidate) and the sample count, so the same inputs always give the same answer.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

# Resamples per chunk: bounds memory at (chunk x requests) indices however many requests a round has.
_CHUNK = 200


def normal_two_sided_p(z: float) -> float:
    """Two-sided p-value of a standard normal statistic."""
    return math.erfc(abs(z) / math.sqrt(2.0))


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    # Lentz's method for the incomplete beta continued fraction (Numerical Recipes, betacf).
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a - 1.0 + 2 * m) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1.0 + 2 * m))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_continued_fraction(a, b, x) / a
    return 1.0 - front * _beta_continued_fraction(b, a, 1.0 - x) / b


def student_t_two_sided_p(t: float, df: float) -> float:
    """Two-sided p-value of Student's t with `df` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


@functools.lru_cache(maxsize=64)
def t_critical(df: float, level: float = 0.05) -> float:
    """The two-sided critical value of Student's t at `level` (5%: the normal's 1.96 when `df` is infinite)."""
    if math.isinf(df) and level == 0.05:
        return 1.959963984540054
    p_of = normal_two_sided_p if math.isinf(df) else functools.partial(student_t_two_sided_p, df=df)
    low, high = 0.0, 1e6
    for _ in range(200):  # bisection on the two-sided p-value, which falls as t grows
        mid = (low + high) / 2.0
        low, high = (mid, high) if p_of(mid) > level else (low, mid)
    return high



def welch_log_se(baseline: Sequence[float], candidate: Sequence[float]) -> tuple[float, float] | None:
    """Welch's standard error of the log ratio between repeated rounds, with its degrees of freedom.

    Needs two or more positive repeats per side; None otherwise. Zero spread on both sides (a deterministic
    runner) gives a standard error of 0: any difference is then real.
    """
    if len(baseline) < 2 or len(candidate) < 2 or min(*baseline, *candidate) <= 0:
        return None
    log_b, log_c = np.log(np.asarray(baseline, float)), np.log(np.asarray(candidate, float))
    var_b, var_c = log_b.var(ddof=1) / len(log_b), log_c.var(ddof=1) / len(log_c)
    if var_b + var_c == 0.0:
        return 0.0, math.inf
    # Welch-Satterthwaite degrees of freedom.
    df = (var_b + var_c) ** 2 / (var_b**2 / (len(log_b) - 1) + var_c**2 / (len(log_c) - 1))
    return math.sqrt(var_b + var_c), df


def t_test_p(log_ratio: float, se: float, df: float = math.inf) -> float:
    """Two-sided p-value of a log ratio given its standard error (normal when `df` is infinite)."""
    if se == 0.0:
        return 1.0 if log_ratio == 0.0 else 0.0
    if math.isinf(df):
        return normal_two_sided_p(log_ratio / se)
    return student_t_two_sided_p(log_ratio / se, df)


def two_proportion_test(failed_b: float, total_b: float, failed_c: float, total_c: float) -> float:
    """Two-sided p-value that two failure proportions differ (pooled z-test)."""
    if total_b <= 0 or total_c <= 0:
        return 1.0
    pooled = (failed_b + failed_c) / (total_b + total_c)
    if pooled <= 0.0 or pooled >= 1.0:
        return 1.0
    se = math.sqrt(pooled * (1.0 - pooled) * (1.0 / total_b + 1.0 / total_c))
    return normal_two_sided_p((failed_c / total_c - failed_b / total_b) / se)


def holm_adjust(p_values: dict[str, float]) -> dict[str, float]:
    """Holm step-down adjusted p-values: compare each to the family-wise level directly."""
    ordered = sorted(p_values.items(), key=lambda item: item[1])
    adjusted: dict[str, float] = {}
    running = 0.0
    for rank, (name, p) in enumerate(ordered):
        running = max(running, min(1.0, (len(ordered) - rank) * p))
        adjusted[name] = running
    return adjusted


def chunk_counts(resamples: int) -> list[int]:
    """Resamples split into chunks of at most `_CHUNK`, bounding memory at (chunk x requests) indices."""
    return [min(_CHUNK, resamples - start) for start in range(0, resamples, _CHUNK)]


def block_length(configured: int, n: int, population: int) -> int:
    """Requests per resampled block: the configured length, else about sqrt(n), never past the population."""
    return min(population, configured or max(1, round(math.sqrt(n))))


def circular_blocks(rng: np.random.Generator, count: int, n: int, population: int, block: int) -> np.ndarray:
    """`count` resamples of `n` indices into `population`, drawn as runs of `block` consecutive indices
    (wrapping around), so requests that shared a batch move together."""
    starts = rng.integers(0, population, size=(count, math.ceil(n / block)), dtype=np.int32)
    return ((starts[:, :, None] + np.arange(block, dtype=np.int32)) % population).reshape(count, -1)[:, :n]


class SampleBootstrap:
    """Circular block bootstrap of per-request samples, giving the noise of a log ratio of statistics.

    Two estimates are taken and the larger kept: resampling each side on its own, and resampling both
    sides from their pooled requests (the spread the statistic would have if nothing had changed). The
    first alone is too optimistic when a side's sample happens to be tight: a p99 set by a few lucky
    requests looks certain, and A/A rounds then differ "significantly" more often than the level says.
    """

    def __init__(self, seed: int, resamples: int, block: int = 0) -> None:
        self._seed, self._resamples, self._block = seed, resamples, block
        self._cache: dict[tuple[int, int, int], list[np.ndarray]] = {}

    def _index_chunks(self, n: int, population: int, stream: int) -> list[np.ndarray]:
        # Seeded by (seed, stream, sizes): the same inputs always resample the same requests, and every
        # statistic over the same requests (TTFT, TPOT, E2E of one request) resamples the same rows.
        key = (n, population, stream)
        if key not in self._cache:
            rng = np.random.default_rng([self._seed, stream, n, population])
            block = block_length(self._block, n, population)
            self._cache[key] = [circular_blocks(rng, count, n, population, block)
                                for count in chunk_counts(self._resamples)]
        return self._cache[key]

    def _log_quantile_sd(self, values: np.ndarray, n: int, stream: int, quantiles: Sequence[float]) -> np.ndarray:
        draws = [np.quantile(values[idx], quantiles, axis=1).T for idx in self._index_chunks(n, len(values), stream)]
        return np.log(np.concatenate(draws)).std(axis=0, ddof=1)

    def quantile_se(self, base: np.ndarray, cand: np.ndarray, quantiles: Sequence[float]) -> np.ndarray:
        """Standard error of log(candidate quantile / baseline quantile), one per quantile."""
        separate = np.hypot(self._log_quantile_sd(base, len(base), 0, quantiles),
                            self._log_quantile_sd(cand, len(cand), 1, quantiles))
        pooled = self._log_quantile_sd(np.concatenate([base, cand]), len(base), 2, quantiles)
        # Variance scales as 1/n: one pooled draw of the baseline's size stands for both sides.
        return np.maximum(separate, pooled * math.sqrt(1.0 + len(base) / len(cand)))

    def _log_ratio_sd(self, numerator: np.ndarray | None, denominator: np.ndarray, n: int, stream: int) -> float:
        draws = [(numerator[idx].sum(axis=1) if numerator is not None else n) / denominator[idx].sum(axis=1)
                 for idx in self._index_chunks(n, len(denominator), stream)]
        return float(np.log(np.concatenate(draws)).std(ddof=1))

    def ratio_se(self, base: tuple[np.ndarray | None, np.ndarray], cand: tuple[np.ndarray | None, np.ndarray]) -> float:
        """Standard error of the log ratio of sum(numerator) / sum(denominator) between the sides.

        A numerator of None counts requests (sum of ones) without gathering them.
        """
        n_b, n_c = len(base[1]), len(cand[1])
        separate = math.hypot(self._log_ratio_sd(*base, n_b, 0), self._log_ratio_sd(*cand, n_c, 1))
        numerator = None if base[0] is None or cand[0] is None else np.concatenate([base[0], cand[0]])
        pooled = self._log_ratio_sd(numerator, np.concatenate([base[1], cand[1]]), n_b, 2)
        return max(separate, pooled * math.sqrt(1.0 + n_b / n_c))
