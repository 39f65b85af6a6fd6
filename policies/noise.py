"""Measured noise: block bootstrap of per-request samples, Welch's t over repeats, an exact test of failures.

Everything here is deterministic: the bootstrap draws from a generator seeded by the policy settings, the
side (baseline or candidate) and the sample count, so the same inputs always give the same answer.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

# Resamples per chunk: bounds memory at (chunk x requests) indices however many requests a round has.
_CHUNK = 200


def normal_two_sided_p(z: float) -> float:
    """Two-sided p-value of a standard normal statistic."""
    return float(2.0 * stats.norm.sf(abs(z)))


def student_t_two_sided_p(t: float, df: float) -> float:
    """Two-sided p-value of Student's t with `df` degrees of freedom (the normal's when `df` is infinite)."""
    return float(2.0 * stats.t.sf(abs(t), df))


@functools.lru_cache(maxsize=64)
def t_critical(df: float, level: float = 0.05) -> float:
    """The two-sided critical value of Student's t at `level` (5%: the normal's 1.96 when `df` is infinite)."""
    return float(stats.t.isf(level / 2.0, df))


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


def failure_rate_test(failed_b: float, total_b: float, failed_c: float, total_c: float) -> float:
    """Two-sided p-value that two failure proportions differ: Fisher's exact test on the 2x2 table.

    Counts are rounded to whole requests (they come from rates over requests sent). Exact, where the
    normal approximation (a two-proportion z-test) is not: with rare failures, 0 of 500 against 4 of 500,
    the z-test gives p = 0.045 and the exact test p = 0.12; the z-test's level is then not the one asked for.
    """
    if total_b <= 0 or total_c <= 0:
        return 1.0
    f_b, f_c = round(failed_b), round(failed_c)
    n_b, n_c = max(round(total_b), f_b), max(round(total_c), f_c)
    return float(stats.fisher_exact([[f_b, n_b - f_b], [f_c, n_c - f_c]]).pvalue)


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
