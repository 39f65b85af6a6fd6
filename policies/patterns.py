"""The casebook's metric-change pattern table (section "Metric Change Patterns"), as labels that match figures.

| Observed change                  | Meaning                               | Next action                      |
| Throughput up, latency up        | effect of increasing batch size       | keep if the SLO has headroom     |
| Throughput up, latency down      | bottleneck itself removed             | correct direction: accept        |
| Throughput down, tail down a lot | stability traded for efficiency       | keep if a latency SLO exists     |
| Median unchanged, p99 only down  | only tail requests improved           | typical of HiCache/warming       |
| Throughput down, latency up      | wrong direction                       | roll back immediately            |
| Nothing changed                  | bottleneck is elsewhere               | re-examine the bottleneck        |

The label is a pure function of the four figures the report prints for a round, each the mean over repeats
compared pair by pair with its baseline: output throughput, and median TTFT, p99 TTFT and median ITL (the
latency figures). A figure moved only when its change is at least its minimum effect and beyond noise
(Direction BETTER or WORSE); a pessimistic reading also counts a large but unproven worsening as moved. A
+0.3% or a +9% unproven throughput change is "flat": no label then says throughput went down, or up.
Combinations the casebook's table leaves unnamed get their own label (throughput flat with latency up,
throughput down with latency flat, ...), so no label claims a direction its figures do not show.

The other figures compared (request throughput, p99 ITL, max ITL, failure rate) never change the label;
the verdict reads them where an SLO names them (policies.objectives).
"""

from __future__ import annotations

import msgspec

from policies.changes import Direction, MetricChange
from policies.settings import PolicySettings
from service import Pattern

# The figures a label speaks for (service/engine/report.py prints them for every round).
LABEL_THROUGHPUT = ("output_throughput",)
LABEL_LATENCY = ("median_ttft_ms", "p99_ttft_ms", "median_itl_ms")
LABEL_FIGURES = (*LABEL_THROUGHPUT, *LABEL_LATENCY)


class GroupState(msgspec.Struct, frozen=True, kw_only=True):
    """What one set of figures did."""

    better: bool = False
    worse: bool = False
    known: bool = False
    largest_gain: float = 0.0  # the largest proven improvement, as a positive fraction
    largest_loss: float = 0.0  # the largest worsening counted, as a positive fraction


def _state(members: list[MetricChange], pessimistic: bool) -> GroupState:
    better = [c for c in members if c.direction is Direction.BETTER]
    worse = [c for c in members if c.direction is Direction.WORSE
             or (pessimistic and c.direction is Direction.UNCERTAIN and not c.improves)]
    return GroupState(
        better=bool(better),
        worse=bool(worse),
        known=any(c.direction is not Direction.UNKNOWN for c in members),
        largest_gain=max((abs(c.change) for c in better), default=0.0),
        largest_loss=max((abs(c.change) for c in worse), default=0.0),
    )


def group_state(changes: list[MetricChange], group: str, *, pessimistic: bool = False) -> GroupState:
    """Summarise one group of every figure compared (throughput, latency, tail); `pessimistic` counts
    UNCERTAIN worsenings as WORSE."""
    return _state([c for c in changes if c.spec.group == group], pessimistic)


def label_states(changes: list[MetricChange], *, pessimistic: bool = False) -> tuple[GroupState, GroupState,
                                                                                         GroupState]:
    """(throughput, median latency, p99 TTFT) over the label's figures only."""
    by_key = {c.spec.key: c for c in changes}
    pick = [by_key[k] for k in LABEL_THROUGHPUT if k in by_key]
    medians = [by_key[k] for k in ("median_ttft_ms", "median_itl_ms") if k in by_key]
    tail = [by_key[k] for k in ("p99_ttft_ms",) if k in by_key]
    return _state(pick, pessimistic), _state(medians, pessimistic), _state(tail, pessimistic)


def classify(changes: list[MetricChange], settings: PolicySettings, *, pessimistic: bool = False) -> Pattern | None:
    """The label the printed figures show, or None when none of them could be measured (too few samples)."""
    throughput, median, tail = label_states(changes, pessimistic=pessimistic)
    if not (throughput.known or median.known or tail.known):
        return None
    worse = median.worse or tail.worse
    better = median.better or tail.better
    if throughput.better and not throughput.worse:
        if worse:
            return Pattern.THROUGHPUT_UP_LATENCY_UP
        return Pattern.THROUGHPUT_UP_LATENCY_DOWN if better else Pattern.THROUGHPUT_UP
    # A latency drop pays for lost throughput (or a higher median) only when it is large and larger than
    # the loss (casebook: chunked prefill 4096 kept at -63% p99 TTFT for -3.6% throughput; 2048 rolled back
    # at -2.3% p99 for -6.4%).
    gain = max(tail.largest_gain, median.largest_gain)
    a_lot = gain >= settings.tail_tradeoff_change and gain > throughput.largest_loss
    if throughput.worse:
        if a_lot:
            return Pattern.THROUGHPUT_DOWN_TAIL_DOWN
        return Pattern.THROUGHPUT_DOWN_LATENCY_UP if worse else Pattern.THROUGHPUT_DOWN
    if worse:
        return Pattern.LATENCY_TRADEOFF if a_lot else Pattern.LATENCY_UP
    if tail.better and (not median.better or tail.largest_gain >= 2 * median.largest_gain):
        # Casebook grammar warming: median -10%, p99 -54%: the tail is where the change lives.
        return Pattern.MEDIAN_FLAT_P99_DOWN
    if better:
        return Pattern.LATENCY_DOWN
    return Pattern.NOTHING_CHANGED


MEANING: dict[Pattern, str] = {
    Pattern.THROUGHPUT_UP_LATENCY_UP: "batch effect",
    Pattern.THROUGHPUT_UP_LATENCY_DOWN: "bottleneck removed",
    Pattern.THROUGHPUT_UP: "more throughput at the same latency, bottleneck removed",
    Pattern.THROUGHPUT_DOWN_TAIL_DOWN: "stability traded for efficiency",
    Pattern.THROUGHPUT_DOWN: "throughput lost with TTFT and median ITL unchanged",
    Pattern.MEDIAN_FLAT_P99_DOWN: "only tail requests improved (the HiCache/warming pattern)",
    Pattern.LATENCY_DOWN: "lower latency at the same throughput",
    Pattern.LATENCY_TRADEOFF: "one latency traded for another at the same throughput",
    Pattern.LATENCY_UP: "latency up at the same throughput, wrong direction",
    Pattern.THROUGHPUT_DOWN_LATENCY_UP: "wrong direction",
    Pattern.NOTHING_CHANGED: "throughput, TTFT and median ITL unchanged beyond noise, the bottleneck is elsewhere",
    Pattern.NOT_APPLICABLE: "no pattern",
}
