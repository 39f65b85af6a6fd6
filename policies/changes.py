"""Per-metric changes between a baseline and a candidate round, each with its measured noise.

A change is the relative difference of the bench figure (averaged over repeats). Its noise comes from the
per-request samples (block bootstrap) and from the spread across repeats (Welch's t), whichever the
rounds carry; with both, the larger of the two is used. A change counts only when it is at least the
minimum effect and significant after Holm's correction over every metric compared.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import msgspec
import numpy as np

from policies.noise import SampleBootstrap, failure_rate_test, holm_adjust, t_critical, t_test_p, welch_log_se
from policies.pairing import PairedBootstrap, paired_log_se
from policies.settings import PolicySettings
from service import RoundResult


class Direction(StrEnum):
    """What a metric did, judged against its minimum effect and its noise."""

    BETTER = "better"
    WORSE = "worse"
    FLAT = "flat"  # smaller than the minimum effect: within the noise band
    UNCERTAIN = "uncertain"  # large enough to matter but not significant: noise too large to tell
    UNKNOWN = "unknown"  # not measured, or too few samples/repeats to estimate noise


class MetricSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A bench figure the policy compares, its pattern group and how its noise is estimated.

    `sample` names the per-request samples standing in for the figure: ("ttft_ms", 0.99) is a quantile of
    the TTFT samples; "output_rate" is output tokens over E2E slot-time (E2E over the concurrency:
    Little's law); "request_rate" is requests over the same. None means only repeats can measure its noise.
    """

    key: str
    label: str
    unit: str
    group: str
    higher_is_better: bool
    sample: tuple[str, float] | str | None = None


# Per-request TPOT (mean gap of one request) stands in for ITL: bench_serving keeps no per-gap samples.
THROUGHPUT = (
    MetricSpec(key="output_throughput", label="output throughput", unit="tok/s", group="throughput",
               higher_is_better=True, sample="output_rate"),
    MetricSpec(key="request_throughput", label="request throughput", unit="req/s", group="throughput",
               higher_is_better=True, sample="request_rate"),
)
LATENCY = (
    MetricSpec(key="median_ttft_ms", label="median TTFT", unit="ms", group="latency", higher_is_better=False,
               sample=("ttft_ms", 0.5)),
    MetricSpec(key="median_itl_ms", label="median ITL", unit="ms", group="latency", higher_is_better=False,
               sample=("tpot_ms", 0.5)),
)
TAIL = (
    MetricSpec(key="p99_ttft_ms", label="p99 TTFT", unit="ms", group="tail", higher_is_better=False,
               sample=("ttft_ms", 0.99)),
    MetricSpec(key="p99_itl_ms", label="p99 ITL", unit="ms", group="tail", higher_is_better=False),
    MetricSpec(key="max_itl_ms", label="max ITL", unit="ms", group="tail", higher_is_better=False),
)
PATTERN_METRICS = (*THROUGHPUT, *LATENCY, *TAIL)
_QUANTILES = (0.5, 0.95, 0.99)


class MetricChange(msgspec.Struct, frozen=True, kw_only=True):
    """One metric's change: values, relative change (absolute for failure rate), noise and verdict."""

    spec: MetricSpec
    baseline: float
    candidate: float
    change: float
    p_value: float | None = None
    p_adjusted: float | None = None
    ci: tuple[float, float] | None = None
    method: str = ""
    direction: Direction = Direction.UNKNOWN

    @property
    def improves(self) -> bool:
        """Whether the point estimate moved in the better direction."""
        return (self.change > 0) == self.spec.higher_is_better and self.change != 0


@dataclass(frozen=True)
class Measurement:
    """One side's repeats: bench figures per repeat and per-request samples pooled across repeats."""

    results: list[RoundResult]
    samples: dict[str, np.ndarray]
    counts: dict[str, tuple[int, ...]]

    @classmethod
    def of(cls, results: Sequence[RoundResult]) -> Measurement:
        """Pool the per-request samples of every repeat, remembering how many each repeat gave.

        `e2e_slot_ms` is each request's E2E divided by its repeat's concurrency, so output tokens over it
        sum to the throughput whatever the client concurrency (Little's law); a candidate that changes
        the concurrency (the nightly batch's 256 -> 512 clients) is then compared like for like.
        """
        pooled: dict[str, np.ndarray] = {}
        counts: dict[str, tuple[int, ...]] = {}
        for name in ("ttft_ms", "e2e_ms", "tpot_ms", "output_tokens"):
            arrays = [np.asarray(getattr(r.samples, name), dtype=float) for r in results]
            pooled[name] = np.concatenate(arrays) if arrays else np.empty(0)
            counts[name] = tuple(len(a) for a in arrays)
        slots = [np.asarray(r.samples.e2e_ms, dtype=float) / (r.bench.concurrency if r.bench.concurrency > 0 else 1.0)
                 for r in results]
        pooled["e2e_slot_ms"] = np.concatenate(slots) if slots else np.empty(0)
        return cls(results=list(results), samples=pooled, counts=counts)

    def figures(self, key: str) -> list[float]:
        """One bench figure per repeat."""
        return [float(getattr(r.bench, key)) for r in self.results]

    def mean(self, key: str) -> float:
        """A bench figure averaged over repeats (what the decision and the report quote)."""
        return float(np.mean(self.figures(key)))


class Comparison:
    """Compares the two sides metric by metric with a shared, seeded bootstrap per side."""

    def __init__(self, baseline: Sequence[RoundResult], candidate: Sequence[RoundResult],
                 settings: PolicySettings) -> None:
        self.settings = settings
        self.baseline, self.candidate = Measurement.of(baseline), Measurement.of(candidate)
        self._boot = SampleBootstrap(settings.bootstrap_seed, settings.bootstrap_resamples, settings.bootstrap_block)
        self._paired = PairedBootstrap(settings.bootstrap_seed, settings.bootstrap_resamples, settings.bootstrap_block)
        self._quantile_se: dict[str, np.ndarray | None] = {}
        self._rate_se: dict[str, float | None] = {}

    @property
    def seed_paired(self) -> bool:
        """Whether repeat i of both sides ran on the same traffic seed (the engine stamps the seeds).

        The engine runs the candidate on the baseline's seeds (common random numbers); rounds without
        seeds, or with different ones, are compared as two independent groups.
        """
        base = [r.provenance.seed for r in self.baseline.results]
        cand = [r.provenance.seed for r in self.candidate.results]
        return bool(base) and base == cand and None not in base

    def paired(self, name: str) -> bool:
        """Whether request j of repeat i is the same prompt on both sides: same seeds, same request counts."""
        base, cand = self.baseline.counts[name], self.candidate.counts[name]
        return self.seed_paired and base == cand and sum(base) > 0

    def raw(self, spec: MetricSpec, values: tuple[float, float] | None = None) -> MetricChange:
        """The change of one bench figure with its unadjusted p-value (direction not yet judged).

        Args:
            spec: The figure, and where its noise comes from.
            values: (baseline, candidate) to compare instead of the bench figures, for figures that are
                proportional to a bench figure and so share its noise (cost per 1M tokens, hours).
        """
        if values is None:
            base, cand = self.baseline.mean(spec.key), self.candidate.mean(spec.key)
        else:
            base, cand = values
        if base <= 0 or cand <= 0 or not (math.isfinite(base) and math.isfinite(cand)):
            return MetricChange(spec=spec, baseline=base, candidate=cand, change=0.0, method="not reported")
        log_ratio = math.log(cand / base)
        noise = self._noise(spec, log_ratio)
        if noise is None:
            return MetricChange(spec=spec, baseline=base, candidate=cand, change=cand / base - 1.0,
                                method="too few samples or repeats")
        se, p, method, df = noise
        half = t_critical(df) * se
        ci = (math.exp(log_ratio - half) - 1.0, math.exp(log_ratio + half) - 1.0)
        return MetricChange(spec=spec, baseline=base, candidate=cand, change=cand / base - 1.0,
                            p_value=p, ci=ci, method=method)

    def _noise(self, spec: MetricSpec, log_ratio: float) -> tuple[float, float, str, float] | None:
        """(standard error of the log ratio, p-value, how it was measured, degrees of freedom)."""
        base_figures, cand_figures = self.baseline.figures(spec.key), self.candidate.figures(spec.key)
        n_b, n_c = len(base_figures), len(cand_figures)
        seeds = paired_log_se(base_figures, cand_figures) if self.seed_paired else None
        if seeds is not None and n_b >= self.settings.min_paired_seeds:
            # The seed is what replicates a run: per-seed log ratios are the paired observations. Blocks of
            # one closed-loop run are not exchangeable (a start burst, a drain), so the per-request
            # bootstrap is left for rounds with fewer seeds.
            return seeds[0], t_test_p(log_ratio, *seeds), f"paired t over {n_b} seeds", seeds[1]
        sample_se = self._sample_se(spec)
        repeats = seeds if seeds is not None else welch_log_se(base_figures, cand_figures)
        repeat_text = f"paired t over {n_b} seeds" if seeds is not None else f"Welch t over {n_b}+{n_c} repeats"
        sample_text = "paired block bootstrap" if self.paired(_sample_name(spec.sample)) else "block bootstrap"
        if sample_se is not None and repeats is not None:
            # Both estimates exist: trust the larger, since requests within a run can share more noise
            # (warm-up, drain) than the bootstrap sees.
            se = max(sample_se, repeats[0])
            return se, t_test_p(log_ratio, se), f"{sample_text} and {repeat_text}", math.inf
        if sample_se is not None:
            return sample_se, t_test_p(log_ratio, sample_se), f"{sample_text} of per-request samples", math.inf
        if repeats is not None:
            return repeats[0], t_test_p(log_ratio, *repeats), repeat_text, repeats[1]
        return None

    def _sample_se(self, spec: MetricSpec) -> float | None:
        if spec.sample is None:
            return None
        if isinstance(spec.sample, tuple):
            name, quantile = spec.sample
            se = self._quantiles(name)
            n = min(len(self.baseline.samples[name]), len(self.candidate.samples[name]))
            if se is None or n * (1.0 - quantile) < self.settings.min_tail_exceedances:
                return None
            return float(se[_QUANTILES.index(quantile)])
        if spec.sample not in self._rate_se:
            self._rate_se[spec.sample] = self._rate_bootstrap_se(spec.sample)
        return self._rate_se[spec.sample]

    def _rate_bootstrap_se(self, rate: str) -> float | None:
        # Rates are per-request sums over the E2E slots, so the requests pair as the E2E samples do.
        sides = [_rate_samples(side, rate) for side in (self.baseline, self.candidate)]
        if sides[0] is None or sides[1] is None or min(len(sides[0][1]), len(sides[1][1])) < self.settings.min_samples:
            return None
        boot = self._paired if self.paired(_sample_name(rate)) else self._boot
        return boot.ratio_se(sides[0], sides[1])

    def _quantiles(self, name: str) -> np.ndarray | None:
        # One bootstrap per sample array serves every quantile of it.
        if name not in self._quantile_se:
            base, cand = self.baseline.samples[name], self.candidate.samples[name]
            usable = (min(len(base), len(cand)) >= max(1, self.settings.min_samples)
                      and base.min() > 0 and cand.min() > 0)
            boot = self._paired if self.paired(name) else self._boot
            self._quantile_se[name] = boot.quantile_se(base, cand, _QUANTILES) if usable else None
        return self._quantile_se[name]

    def failure_rate(self) -> MetricChange:
        """The failure-rate change (absolute), tested exactly (Fisher) over every request sent."""
        spec = MetricSpec(key="failure_rate", label="failure rate", unit="", group="failure", higher_is_better=False)
        counts = [_failure_counts(side.results) for side in (self.baseline, self.candidate)]
        base = counts[0][0] / counts[0][1] if counts[0][1] else 0.0
        cand = counts[1][0] / counts[1][1] if counts[1][1] else 0.0
        if not counts[0][1] or not counts[1][1]:
            return MetricChange(spec=spec, baseline=base, candidate=cand, change=cand - base, method="not reported")
        p = failure_rate_test(*counts[0], *counts[1])
        return MetricChange(spec=spec, baseline=base, candidate=cand, change=cand - base, p_value=p,
                            method="Fisher's exact test")


def _sample_name(sample: str | tuple[str, float] | None) -> str:
    """The per-request samples a figure's noise is resampled from: its own for a quantile, E2E for a rate."""
    return sample[0] if isinstance(sample, tuple) else "e2e_ms"


def _rate_samples(side: Measurement, sample: str) -> tuple[np.ndarray | None, np.ndarray] | None:
    # Throughput is work over time (Little's law): output tokens or requests per E2E slot-time.
    e2e = side.samples["e2e_slot_ms"]
    numerator = side.samples["output_tokens"] if sample == "output_rate" else None
    if (numerator is not None and len(numerator) != len(e2e)) or len(e2e) == 0 or e2e.min() <= 0:
        return None
    return numerator, e2e


def _failure_counts(results: Sequence[RoundResult]) -> tuple[float, float]:
    # bench_serving counts completed requests; the failed ones are the rest of those sent.
    failed = total = 0.0
    for r in results:
        sent = r.bench.completed / (1.0 - r.failure_rate) if r.failure_rate < 1.0 else float(r.bench.completed)
        failed += r.failure_rate * sent
        total += sent
    return failed, total


def judge(changes: list[MetricChange], settings: PolicySettings) -> list[MetricChange]:
    """Holm-adjust the p-values over the family and give each change its direction."""
    adjusted = holm_adjust({c.spec.key: c.p_value for c in changes if c.p_value is not None})
    return [msgspec.structs.replace(c, p_adjusted=adjusted.get(c.spec.key),
                                    direction=_direction(c, adjusted.get(c.spec.key), settings))
            for c in changes]


def minimum_effect(spec: MetricSpec, settings: PolicySettings) -> float:
    """The smallest change of this metric that counts."""
    return {"throughput": settings.min_throughput_change, "latency": settings.min_median_change,
            "tail": settings.min_tail_change, "failure": settings.min_failure_rate_change}[spec.group]


def _direction(change: MetricChange, p_adjusted: float | None, settings: PolicySettings) -> Direction:
    if p_adjusted is None:
        return Direction.UNKNOWN
    if abs(change.change) < minimum_effect(change.spec, settings):
        return Direction.FLAT
    if change.improves and p_adjusted < settings.alpha_improvement:
        return Direction.BETTER
    # A worsening is judged on its own p-value: keeping a bad change costs more than missing a good one.
    if not change.improves and change.p_value is not None and change.p_value < settings.alpha_regression:
        return Direction.WORSE
    return Direction.UNCERTAIN
