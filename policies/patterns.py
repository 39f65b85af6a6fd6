"""The casebook's metric-change pattern table (section "Metric Change Patterns").

| Observed change                  | Meaning                               | Next action                      |
| Throughput up, latency up        | effect of increasing batch size       | keep if the SLO has headroom     |
| Throughput up, latency down      | bottleneck itself removed             | correct direction: accept        |
| Throughput down, tail down a lot | stability traded for efficiency       | keep if a latency SLO exists     |
| Median unchanged, p99 only down  | only tail requests improved           | typical of HiCache/warming       |
| Throughput down, latency up      | wrong direction                       | roll back immediately            |
| Nothing changed                  | bottleneck is elsewhere               | re-examine the bottleneck        |

"Throughput" is output and request throughput, "latency" is median TTFT and ITL, "tail" is p99 TTFT,
p99 ITL and max ITL. Only changes judged BETTER or WORSE (at least the minimum effect, and significant)
move a group; a pessimistic reading also counts large but unproven worsenings as WORSE.
"""

from __future__ import annotations

import msgspec

from policies.changes import Direction, MetricChange
from policies.settings import PolicySettings
from service import Pattern


class GroupState(msgspec.Struct, frozen=True, kw_only=True):
    """What one group of metrics (throughput, latency, tail) did."""

    better: bool = False
    worse: bool = False
    known: bool = False
    largest_gain: float = 0.0  # the largest proven improvement, as a positive fraction
    largest_loss: float = 0.0  # the largest worsening counted, as a positive fraction


def group_state(changes: list[MetricChange], group: str, *, pessimistic: bool = False) -> GroupState:
    """Summarise one group; `pessimistic` counts UNCERTAIN worsenings as WORSE."""
    members = [c for c in changes if c.spec.group == group]
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


def classify(changes: list[MetricChange], settings: PolicySettings, *, pessimistic: bool = False) -> Pattern | None:
    """The pattern the changes show, or None when no group could be measured (too few samples)."""
    throughput, latency, tail = (group_state(changes, g, pessimistic=pessimistic)
                                 for g in ("throughput", "latency", "tail"))
    if not (throughput.known or latency.known or tail.known):
        return None
    if throughput.better and not throughput.worse:
        if latency.worse or tail.worse:
            return Pattern.THROUGHPUT_UP_LATENCY_UP
        return Pattern.THROUGHPUT_UP_LATENCY_DOWN
    # A latency drop pays for lost throughput (or a slightly higher median) only when it is large and
    # larger than the loss (casebook: chunked prefill 4096 kept at -63% p99 TTFT for -3.6% throughput;
    # 2048 rolled back at -2.3% p99 for -6.4%).
    gain = max(tail.largest_gain, latency.largest_gain)
    tail_tradeoff = gain >= settings.tail_tradeoff_change and gain > throughput.largest_loss
    if throughput.worse or latency.worse or tail.worse:
        return Pattern.THROUGHPUT_DOWN_TAIL_DOWN if tail_tradeoff else Pattern.THROUGHPUT_DOWN_LATENCY_UP
    if tail.better and (not latency.better or tail.largest_gain >= 2 * latency.largest_gain):
        # Casebook grammar warming: median -10%, p99 -54%: the tail is where the change lives.
        return Pattern.MEDIAN_FLAT_P99_DOWN
    if latency.better:
        return Pattern.THROUGHPUT_UP_LATENCY_DOWN
    return Pattern.NOTHING_CHANGED


MEANING: dict[Pattern, str] = {
    Pattern.THROUGHPUT_UP_LATENCY_UP: "batch effect",
    Pattern.THROUGHPUT_UP_LATENCY_DOWN: "bottleneck removed",
    Pattern.THROUGHPUT_DOWN_TAIL_DOWN: "stability traded for efficiency",
    Pattern.MEDIAN_FLAT_P99_DOWN: "only tail requests improved (the HiCache/warming pattern)",
    Pattern.THROUGHPUT_DOWN_LATENCY_UP: "wrong direction",
    Pattern.NOTHING_CHANGED: "nothing changed beyond noise, the bottleneck is elsewhere",
    Pattern.NOT_APPLICABLE: "no pattern",
}
