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
    # On these 500 requests the throughput loss stays within noise (-1.7%), so the label says "flat": the
    # p99 TTFT drop is traded for a median TTFT that may have risen.
    with_slo = decide(policy, decode_speed=0.964, ttft_scale=1.058, tail_scale=0.1)
    assert (with_slo.pattern, with_slo.verdict) == (Pattern.LATENCY_TRADEOFF, Verdict.KEEP_TRADEOFF)
    assert with_slo.figures["p99_ttft_ms.change"] < -0.3
    # Nightly batch: no latency SLO, so nothing pays for the trade.
    batch = decide(policy, slo=SLO(), objective=BATCH, decode_speed=0.964, ttft_scale=1.058, tail_scale=0.1)
    assert (batch.pattern, batch.verdict) == (Pattern.LATENCY_TRADEOFF, Verdict.ROLLBACK)


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


def test_the_latency_objective_keeps_a_p99_ttft_rise_that_stays_within_the_slo_margin(policy):
    # Casebook EAGLE3: throughput up a lot, TTFT up from the draft model's prefill, "within the SLO margin".
    decision = decide(policy, decode_speed=1.8, ttft_scale=1.35)
    assert decision.figures["p99_ttft_ms.change"] > 0.2
    assert decision.figures["slo.ttft_p95_ms.candidate"] < 0.95 * 4000
    assert (decision.pattern, decision.verdict) == (Pattern.THROUGHPUT_UP_LATENCY_UP, Verdict.KEEP_TRADEOFF)
    assert "p99 TTFT rise stays within the SLO margin" in decision.reasons[0]


def test_the_latency_objective_rolls_back_a_p99_ttft_rise_that_eats_the_slo_margin(policy):
    candidate = make_round(8, decode_speed=1.8, ttft_scale=1.35)
    # The target still holds, with 3% to spare: the SLO gate passes it, the margin does not.
    tight = SLO(ttft_p95_ms=candidate.bench.p95_ttft_ms / 0.97, itl_median_ms=50)
    decision = policy.decide([make_round(7)], [candidate], tight, LATENCY)
    assert all(c.met for c in decision.slo_checks)
    assert (decision.pattern, decision.verdict) == (Pattern.THROUGHPUT_UP_LATENCY_UP, Verdict.ROLLBACK)
    assert "the rise eats the SLO margin: ttft_p95_ms" in decision.reasons[0]
    # Without a TTFT target there is no margin to spend: the lower p99 TTFT wins.
    untargeted = decide(policy, slo=SLO(itl_median_ms=50), decode_speed=1.8, ttft_scale=1.35)
    assert untargeted.verdict is Verdict.ROLLBACK
    assert "no TTFT target leaves a margin to spend" in untargeted.reasons[0]


def test_a_batch_effect_that_brings_a_missed_deadline_closer_is_accepted(policy):
    # Nightly batch: removing speculative decoding / maximising the batch raise throughput and ITL; the
    # 12 h deadline is still missed but closer (casebook: 16.9 -> 14.1 -> 10.6 h).
    slo = SLO(deadline_hours=12, deadline_output_tokens=3.6e8)
    decision = decide(policy, slo=slo, objective=BATCH, decode_speed=1.3, ttft_scale=1.6)
    assert not decision.slo_checks[0].met
    assert decision.figures["slo.deadline_hours.candidate"] < decision.figures["slo.deadline_hours.baseline"]
    assert (decision.pattern, decision.verdict) == (Pattern.THROUGHPUT_UP_LATENCY_UP, Verdict.ACCEPT)
    assert "brings the missed target closer, still missed (deadline_hours " in decision.reasons[0]


def test_a_batch_effect_that_worsens_a_missed_target_has_no_headroom(policy):
    # More throughput on dearer GPUs: the missed cost target moves further away.
    slo = SLO(cost_per_1m_output_max=1.0)
    decision = policy.decide([make_round(7, gpu_hour_price=6.0)],
                             [make_round(8, gpu_hour_price=9.0, decode_speed=1.3, ttft_scale=1.6)], slo, BATCH)
    assert decision.pattern is Pattern.THROUGHPUT_UP_LATENCY_UP
    assert decision.verdict is Verdict.ROLLBACK
    assert "no SLO headroom (cost_per_1m_output_max missed)" in decision.reasons[0]


def test_lost_throughput_is_paid_only_by_the_latency_the_slo_names(policy):
    # Chunk 2048 after 4096: throughput -6.4%, the ITL tail far lower, the TTFT tail the SLO names unchanged.
    # Three repeats a side: p99 and max ITL have no per-request samples, only the spread across repeats.
    baseline = [make_round(seed) for seed in (7, 17, 27)]
    candidate = [make_round(seed + 1, decode_speed=0.936, itl_tail_scale=0.05) for seed in (7, 17, 27)]
    decision = policy.decide(baseline, candidate, CODING_SLO, LATENCY)
    assert decision.figures["max_itl_ms.change"] < -0.3
    # The label speaks for the printed figures (median ITL rose with the slower decode); the ITL tail it does
    # not show is what the trade-off rule weighs.
    assert (decision.pattern, decision.verdict) == (Pattern.THROUGHPUT_DOWN_LATENCY_UP, Verdict.ROLLBACK)
    assert "too little gain on the latency the SLO names" in decision.reasons[0]
    # An SLO that names the ITL tail is paid by the same drop.
    itl_tail_slo = SLO(ttft_p95_ms=4000, itl_median_ms=50, itl_p99_ms=1000)
    kept = policy.decide(baseline, candidate, itl_tail_slo, LATENCY)
    assert (kept.pattern, kept.verdict) == (Pattern.THROUGHPUT_DOWN_LATENCY_UP, Verdict.KEEP_TRADEOFF)


def test_a_tradeoff_that_moves_a_missed_target_further_away_is_rolled_back(policy):
    # A first PD split: the ITL tail collapses for a few % of throughput while every request waits for a
    # queued prefill node, so the TTFT tail the SLO names (and the baseline already misses) grows.
    baseline = [make_round(seed) for seed in (7, 17, 27)]
    candidate = [make_round(seed + 1, decode_speed=0.98, itl_tail_scale=0.05, ttft_scale=3.0) for seed in (7, 17, 27)]
    missed = SLO(ttft_p95_ms=1000, itl_median_ms=50, itl_p99_ms=1000)
    decision = policy.decide(baseline, candidate, missed, LATENCY)
    assert not decision.slo_checks[0].met
    assert (decision.pattern, decision.verdict) == (Pattern.THROUGHPUT_DOWN_LATENCY_UP, Verdict.ROLLBACK)
    assert "a trade-off that moves a missed target further away (ttft_p95_ms" in decision.reasons[0]
    # The same round against a TTFT target both sides meet is the ITL-tail trade-off the SLO pays for.
    roomy = SLO(ttft_p95_ms=40000, itl_median_ms=50, itl_p99_ms=1000)
    kept = policy.decide(baseline, candidate, roomy, LATENCY)
    assert (kept.pattern, kept.verdict) == (Pattern.THROUGHPUT_DOWN_LATENCY_UP, Verdict.KEEP_TRADEOFF)


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
