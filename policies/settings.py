"""The knobs of the decision policies, with the defaults documented in docs/policies.md."""

from __future__ import annotations

import msgspec


class PolicySettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How large and how certain a change must be before a policy calls it.

    A change counts only when it is at least the minimum effect AND statistically significant; smaller
    changes are "within the noise band" (the casebook's "nothing changed").

    Attributes:
        min_throughput_change: Smallest relative throughput change that counts (0.03 = 3%).
        min_median_change: Smallest relative change of median TTFT / ITL that counts.
        min_tail_change: Smallest relative change of p99 TTFT / p99 ITL / max ITL that counts.
        min_failure_rate_change: Smallest absolute failure-rate change that counts (0.002 = 0.2 points).
        tail_tradeoff_change: A tail drop at least this large is "tail latency down a lot", which may pay
            for lost throughput (casebook: chunked prefill gave -63% p99 TTFT for -3.6% throughput).
        latency_slo_margin: Under the `latency` objective a p99 TTFT rise is kept only while every TTFT
            target keeps at least this fraction of itself to spare (0.05: p95 at most 950 ms for a 1 s
            target); a rise that leaves less eats the SLO margin (casebook: EAGLE3's +5% TTFT is kept
            "as it's within the SLO margin"). Under the `throughput` and `deadline` objectives, lost throughput
            buys a latency figure only while the baseline meets its target with less than this to spare.
        alpha_improvement: Family-wise significance level (Holm) for calling a metric better.
        alpha_regression: Family-wise significance level (Holm) for calling a metric worse; looser than
            `alpha_improvement` because keeping a bad change costs more than missing a good one.
        min_samples: Fewest per-request samples per side for a median; fewer means "too few samples".
        min_tail_exceedances: Fewest samples a side must hold beyond a percentile to estimate it
            (p99 with 2 needs 200 requests).
        bootstrap_resamples: Bootstrap resamples per side.
        bootstrap_seed: Seed of the bootstrap, so the same inputs always give the same decision.
        bootstrap_block: Requests per bootstrap block; 0 picks sqrt(n). Blocks keep neighbouring
            requests together, since requests that shared a batch are not independent.
        min_paired_seeds: With at least this many seed-paired repeats per side (the engine runs the
            candidate on the baseline's seeds), each figure is judged by a paired t over the per-seed log
            ratios alone; with fewer, the per-request bootstrap supplies the noise.
        slo_confidence: Confidence of the interval a percentile SLO is judged by (pooled requests of every
            repeat, order-statistic bound): met when the interval is under the target, missed when it is
            over, otherwise within noise, and the decision asks for more seeds.
    """

    min_throughput_change: float = 0.03
    min_median_change: float = 0.05
    min_tail_change: float = 0.10
    min_failure_rate_change: float = 0.002
    tail_tradeoff_change: float = 0.20
    latency_slo_margin: float = 0.05
    alpha_improvement: float = 0.002
    alpha_regression: float = 0.05
    min_samples: int = 30
    min_tail_exceedances: int = 2
    bootstrap_resamples: int = 300
    bootstrap_seed: int = 20260807
    bootstrap_block: int = 0
    min_paired_seeds: int = 3
    slo_confidence: float = 0.95

    def __post_init__(self) -> None:
        if not 0.0 < self.slo_confidence < 1.0:
            raise ValueError(f"slo_confidence must be between 0 and 1 (0.95 is a 95% interval), got {self.slo_confidence}")
