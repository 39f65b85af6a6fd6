"""The casebook's metric-change pattern table, each row reproduced from seeded synthetic rounds.

Each candidate mimics the mechanism of a casebook round (chunked prefill, FP8, EAGLE3, grammar warming,
mem-fraction 0.96) on the coding-assistant baseline.
"""

import pytest

from policies import CasebookPolicy
from service import SLO, Objective, Pattern, Verdict
from tests.unit.policies.policy_rounds import make_round

CODING_SLO = SLO(ttft_p95_ms=4000, itl_median_ms=50)
LATENCY = Objective(kind="latency")
BATCH = Objective(kind="deadline")


@pytest.fixture(scope="module")
def policy():
    return CasebookPolicy()


def decide(policy, slo=CODING_SLO, objective=LATENCY, **candidate):
    return policy.decide([make_round(7)], [make_round(8, **candidate)], slo, objective)


def test_throughput_up_latency_down_is_a_removed_bottleneck_and_accepted(policy):
    # FP8 weights + KV: fewer bytes per decode step, every figure improves (casebook round 2).
    decision = decide(policy, decode_speed=1.35, ttft_scale=0.75)
    assert (decision.pattern, decision.verdict) == (Pattern.THROUGHPUT_UP_LATENCY_DOWN, Verdict.ACCEPT)
    assert decision.reasons[0].startswith("request throughput +") or "output throughput +" in decision.reasons[0]
    assert "bottleneck removed, accepted" in decision.reasons[0]
    assert decision.figures["output_throughput.change"] > 0.3
    assert decision.figures["output_throughput.p_adjusted"] < 0.01


def test_throughput_up_latency_up_is_kept_only_with_slo_headroom(policy):
    # EAGLE3: throughput up, TTFT up from the draft model's prefill (casebook round 3).
    kept = decide(policy, objective=BATCH, decode_speed=1.8, ttft_scale=1.35)
    assert (kept.pattern, kept.verdict) == (Pattern.THROUGHPUT_UP_LATENCY_UP, Verdict.KEEP_TRADEOFF)
    assert "batch effect, kept within SLO headroom" in kept.reasons[0]
    tight = SLO(ttft_p95_ms=2000, itl_median_ms=50)
    no_headroom = decide(policy, slo=tight, objective=BATCH, decode_speed=1.8, ttft_scale=1.35)
    assert no_headroom.pattern is Pattern.THROUGHPUT_UP_LATENCY_UP
    assert no_headroom.verdict is Verdict.ROLLBACK


def test_throughput_down_tail_down_a_lot_is_kept_only_for_a_latency_slo(policy):
    # Chunked prefill 4096: -3.6% throughput, +5.8% median TTFT, p99 TTFT far lower (casebook round 1).
    with_slo = decide(policy, decode_speed=0.964, ttft_scale=1.058, tail_scale=0.1)
    assert (with_slo.pattern, with_slo.verdict) == (Pattern.THROUGHPUT_DOWN_TAIL_DOWN, Verdict.KEEP_TRADEOFF)
    assert with_slo.figures["p99_ttft_ms.change"] < -0.3
    # Nightly batch: no latency SLO, so nothing pays for the lost throughput.
    batch = decide(policy, slo=SLO(), objective=BATCH, decode_speed=0.964, ttft_scale=1.058, tail_scale=0.1)
    assert (batch.pattern, batch.verdict) == (Pattern.THROUGHPUT_DOWN_TAIL_DOWN, Verdict.ROLLBACK)


def test_a_smaller_chunk_that_costs_throughput_for_little_tail_is_rolled_back(policy):
    # Chunk 2048 vs 4096: -6.4% throughput for -2.3% p99 TTFT.
    decision = decide(policy, decode_speed=0.936, tail_scale=0.977)
    assert (decision.pattern, decision.verdict) == (Pattern.THROUGHPUT_DOWN_LATENCY_UP, Verdict.ROLLBACK)


def test_median_flat_p99_down_is_the_warming_pattern_and_accepted(policy):
    # Grammar cache warming: compile cost moved off the tail requests (casebook case 4, round 2).
    decision = decide(policy, tail_scale=0.15)
    assert (decision.pattern, decision.verdict) == (Pattern.MEDIAN_FLAT_P99_DOWN, Verdict.ACCEPT)
    assert "p99 TTFT -" in decision.reasons[0]


def test_throughput_down_latency_up_is_the_wrong_direction_and_rolled_back(policy):
    # mem-fraction-static 0.96: preemption, -7.7% throughput (casebook case 3).
    decision = decide(policy, objective=BATCH, slo=SLO(), decode_speed=0.92)
    assert (decision.pattern, decision.verdict) == (Pattern.THROUGHPUT_DOWN_LATENCY_UP, Verdict.ROLLBACK)
    assert "wrong direction, rolled back" in decision.reasons[0]
    assert decision.figures["output_throughput.change"] < -0.05


def test_the_latency_objective_refuses_a_batch_effect_that_raises_p99_ttft(policy):
    decision = decide(policy, decode_speed=1.8, ttft_scale=1.35)
    assert (decision.pattern, decision.verdict) == (Pattern.THROUGHPUT_UP_LATENCY_UP, Verdict.ROLLBACK)
    assert "latency objective prefers the lower p99 TTFT" in decision.reasons[0]


@pytest.mark.parametrize("seeds", [(7, 8), (1, 2), (3, 4)])
def test_nothing_changed_keeps_the_baseline(policy, seeds):
    decision = policy.decide([make_round(seeds[0])], [make_round(seeds[1])], CODING_SLO, LATENCY)
    assert decision.pattern is Pattern.NOTHING_CHANGED
    assert decision.verdict is Verdict.ROLLBACK
    assert "the bottleneck is elsewhere" in decision.reasons[0]


def test_every_decision_names_its_policy_and_carries_the_slo_assessment(policy):
    decision = decide(policy, decode_speed=1.35, ttft_scale=0.75)
    assert decision.policy == "casebook"
    assert [c.name for c in decision.slo_checks] == ["ttft_p95_ms", "itl_median_ms"]
    assert all(c.met for c in decision.slo_checks)
    assert decision.figures["slo.ttft_p95_ms.target"] == 4000
    assert any(line.startswith("p99 TTFT") and "95% CI" in line for line in decision.reasons)
