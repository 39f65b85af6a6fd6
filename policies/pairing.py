"""Paired noise: the engine sends the baseline and the candidate the same traffic, seed for seed.

Every repeat of a round uses the same seeds as the baseline's repeats (common random numbers), so repeat
i of each side saw the same prompts in the same order, and request j of repeat i is the same prompt on
both sides. Comparing pair by pair removes the noise both sides share (how many 28k-token pastes a seed
drew, which schemas came first) and leaves only the noise of the change itself: the standard analysis of
a paired design, and far more powerful than comparing the two sides as if they were unrelated.

Pairing stays valid when the pairs are unrelated (different seeds, a changed workload): it then measures
what the unpaired analysis measures, only with less power, never with less honesty.

- Repeats: a one-sample t on the per-seed log ratios (`paired_log_se`).
- Per-request samples: a block bootstrap that resamples the same requests on both sides, and a block
  sign-flip that swaps sides within blocks of pairs after scaling the candidate back by the measured
  change (the spread the statistic would have if nothing had changed: the paired form of pooling); the
  larger of the two is kept, as in the unpaired bootstrap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from policies.noise import block_length, chunk_counts, circular_blocks

# Streams of the seeded generator, distinct from the unpaired bootstrap's 0..2.
_RESAMPLE_STREAM, _FLIP_STREAM = 3, 4

Rate = tuple[np.ndarray | None, np.ndarray]


def paired_log_se(baseline: Sequence[float], candidate: Sequence[float]) -> tuple[float, float] | None:
    """Standard error and degrees of freedom of the mean per-seed log ratio (a paired t over repeats).

    Needs two or more positive repeats per side, as many on each side; None otherwise. Identical ratios
    on every seed give a standard error of 0: the change is then the same on every traffic sample.
    """
    if len(baseline) != len(candidate) or len(baseline) < 2 or min(*baseline, *candidate) <= 0:
        return None
    ratios = np.log(np.asarray(candidate, float)) - np.log(np.asarray(baseline, float))
    se = float(ratios.std(ddof=1)) / math.sqrt(len(ratios))
    if se <= 1e-12:  # equal ratios up to rounding
        return 0.0, math.inf
    return se, float(len(ratios) - 1)


class PairedBootstrap:
    """Block bootstrap and block sign-flip over pairs of per-request samples (equal-length, aligned arrays).

    Blocks of about sqrt(n) consecutive requests move together, because requests that shared a batch are
    not independent. Seeded by the policy settings and the sample count: the same inputs always give the
    same answer.
    """

    def __init__(self, seed: int, resamples: int, block: int = 0) -> None:
        self._seed, self._resamples, self._block = seed, resamples, block
        self._cache: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}

    def _plans(self, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per chunk: resampled request indices, and which requests swap sides."""
        if n not in self._cache:
            block = block_length(self._block, n, n)
            resample = np.random.default_rng([self._seed, _RESAMPLE_STREAM, n])
            flip = np.random.default_rng([self._seed, _FLIP_STREAM, n])
            plans = []
            for count in chunk_counts(self._resamples):
                index = circular_blocks(resample, count, n, n, block)
                swap = np.repeat(flip.random((count, math.ceil(n / block))) < 0.5, block, axis=1)[:, :n]
                plans.append((index, swap))
            self._cache[n] = plans
        return self._cache[n]

    def quantile_se(self, base: np.ndarray, cand: np.ndarray, quantiles: Sequence[float]) -> np.ndarray:
        """Standard error of log(candidate quantile / baseline quantile), one per quantile.

        The sign-flip runs on the candidate scaled back by the measured change of that quantile, so it
        shows the spread with nothing changed, not the change itself.
        """
        centred = [cand * (np.quantile(base, q) / np.quantile(cand, q)) for q in quantiles]
        resampled, flipped = [], []
        for index, swap in self._plans(len(base)):
            resampled.append(np.log(np.quantile(cand[index], quantiles, axis=1)
                                    / np.quantile(base[index], quantiles, axis=1)).T)
            columns = []
            for q, moved in zip(quantiles, centred, strict=True):
                b, c = np.where(swap, moved, base), np.where(swap, base, moved)
                columns.append(np.log(np.quantile(c, q, axis=1) / np.quantile(b, q, axis=1)))
            flipped.append(np.stack(columns, axis=1))
        return np.maximum(np.concatenate(resampled).std(axis=0, ddof=1),
                          np.concatenate(flipped).std(axis=0, ddof=1))

    def ratio_se(self, base: Rate, cand: Rate) -> float:
        """Standard error of the log ratio of sum(numerator) / sum(denominator) between the sides.

        A numerator of None on either side counts requests (a sum of ones).
        """
        (num_b, den_b), (num_c, den_c) = base, cand
        if num_b is None or num_c is None:
            num_b = num_c = np.ones(len(den_b))
        # The sign-flip runs on the candidate scaled back by the measured change (nothing changed).
        num_c_centred = num_c * (num_b.sum() / den_b.sum()) / (num_c.sum() / den_c.sum())
        resampled, flipped = [], []
        for index, swap in self._plans(len(den_b)):
            resampled.append(_log_rate_ratio(num_b[index], den_b[index], num_c[index], den_c[index]))
            flipped.append(_log_rate_ratio(np.where(swap, num_c_centred, num_b), np.where(swap, den_c, den_b),
                                           np.where(swap, num_b, num_c_centred), np.where(swap, den_b, den_c)))
        return max(float(np.concatenate(resampled).std(ddof=1)), float(np.concatenate(flipped).std(ddof=1)))


def _log_rate_ratio(num_b: np.ndarray, den_b: np.ndarray, num_c: np.ndarray, den_c: np.ndarray) -> np.ndarray:
    return np.log((num_c.sum(axis=1) / den_c.sum(axis=1)) / (num_b.sum(axis=1) / den_b.sum(axis=1)))
