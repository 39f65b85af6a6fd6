"""The pattern label as a pure function of the four printed figures and their noise band (docs/policies.md).

Figures are given with the direction the noise analysis gave them (better / worse beyond noise, flat below
the minimum effect, uncertain when large but not significant), so each row reads like a report line.
"""

from __future__ import annotations

import pytest

from policies import CasebookPolicy, PolicySettings
from policies.changes import PATTERN_METRICS, Direction, MetricChange
from policies.patterns import classify
from service import SLO, Objective, Pattern, Verdict
from tests.unit.policies.policy_rounds import make_round

SETTINGS = PolicySettings()
SPECS = {spec.key: spec for spec in PATTERN_METRICS}
B, W, F, U = Direction.BETTER, Direction.WORSE, Direction.FLAT, Direction.UNCERTAIN


def figures(**moves: tuple[float, Direction]) -> list[MetricChange]:
    """Every pattern figure, flat at 0% unless `moves` says otherwise (key=(relative change, direction))."""
    out = []
    for key, spec in SPECS.items():
        change, direction = moves.get(key, (0.0, F))
        out.append(MetricChange(spec=spec, baseline=100.0, candidate=100.0 * (1 + change), change=change,
                                p_value=0.5, p_adjusted=0.5, direction=direction))
    return out


@pytest.mark.parametrize(("moves", "label"), [
    # The two rounds of the report: +0.3% and an unproven +9% are flat, whatever latency did.
    ({"output_throughput": (0.003, F), "p99_ttft_ms": (0.40, W)}, Pattern.LATENCY_UP),
    ({"output_throughput": (0.09, U), "median_ttft_ms": (0.12, W)}, Pattern.LATENCY_UP),
    ({"output_throughput": (0.09, U)}, Pattern.NOTHING_CHANGED),
    # Proven moves name themselves.
    ({"output_throughput": (0.31, B), "median_itl_ms": (-0.24, B)}, Pattern.THROUGHPUT_UP_LATENCY_DOWN),
    ({"output_throughput": (0.12, B)}, Pattern.THROUGHPUT_UP),
    ({"output_throughput": (0.66, B), "p99_ttft_ms": (0.15, W)}, Pattern.THROUGHPUT_UP_LATENCY_UP),
    ({"output_throughput": (-0.08, W), "median_itl_ms": (0.09, W)}, Pattern.THROUGHPUT_DOWN_LATENCY_UP),
    ({"output_throughput": (-0.064, W), "p99_ttft_ms": (-0.023, F)}, Pattern.THROUGHPUT_DOWN),
    ({"output_throughput": (-0.036, W), "p99_ttft_ms": (-0.63, B)}, Pattern.THROUGHPUT_DOWN_TAIL_DOWN),
    ({"p99_ttft_ms": (-0.54, B), "median_ttft_ms": (-0.10, B)}, Pattern.MEDIAN_FLAT_P99_DOWN),
    ({"median_ttft_ms": (-0.30, B), "p99_ttft_ms": (-0.15, B)}, Pattern.LATENCY_DOWN),
    ({"p99_ttft_ms": (-0.50, B), "median_ttft_ms": (0.06, W)}, Pattern.LATENCY_TRADEOFF),
    # Figures the label does not read never move it.
    ({"request_throughput": (-0.05, W), "max_itl_ms": (0.80, W), "p99_itl_ms": (-0.5, B)}, Pattern.NOTHING_CHANGED),
])
def test_the_label_says_what_the_printed_figures_show(moves: dict, label: Pattern) -> None:
    assert classify(figures(**moves), SETTINGS) is label


def test_a_large_unproven_rise_counts_only_in_the_pessimistic_reading() -> None:
    changes = figures(output_throughput=(0.10, B), p99_ttft_ms=(0.25, U))
    assert classify(changes, SETTINGS) is Pattern.THROUGHPUT_UP
    assert classify(changes, SETTINGS, pessimistic=True) is Pattern.THROUGHPUT_UP_LATENCY_UP


def test_a_barely_faster_round_with_queueing_is_flat_throughput_with_latency_up() -> None:
    # +0.3% decode speed and every TTFT 40% longer: the report's "throughput_down_latency_up on +0.3%".
    decision = CasebookPolicy().decide([make_round(7)], [make_round(8, decode_speed=1.003, ttft_scale=1.4)],
                                       SLO(ttft_p95_ms=8000, itl_median_ms=50), Objective(kind="latency"))
    assert abs(decision.figures["output_throughput.change"]) < SETTINGS.min_throughput_change
    assert decision.pattern is Pattern.LATENCY_UP and decision.verdict is Verdict.ROLLBACK
    assert "wrong direction, rolled back" in decision.reasons[0]
