"""Paired comparisons: rounds on the same seeds are compared seed by seed, and the SLO's own tail decides."""

import math

import msgspec
import numpy as np
import pytest

from policies import CasebookPolicy
from policies.noise import SampleBootstrap, t_critical
from policies.pairing import PairedBootstrap, paired_log_se
from service import SLO, Objective, Pattern, RoundResult, Verdict
from tests.unit.policies.policy_rounds import make_round

CODING_SLO = SLO(ttft_p95_ms=4000, itl_median_ms=50)
LATENCY = Objective(kind="latency")
THROUGHPUT = Objective(kind="throughput")


def seeded(result: RoundResult, seed: int) -> RoundResult:
    """The round as the engine records it: stamped with the traffic seed it ran on."""
    return msgspec.structs.replace(result, provenance=msgspec.structs.replace(result.provenance, seed=seed))


@pytest.fixture(scope="module")
def policy():
    return CasebookPolicy()


def test_paired_t_over_seeds_uses_the_per_seed_log_ratios():
    se, df = paired_log_se([100.0, 200.0, 400.0], [110.0, 220.0, 440.0])
    assert (se, df) == (0.0, math.inf)  # +10% on every seed: the same change on every traffic sample
    se, df = paired_log_se([100.0, 200.0, 400.0], [110.0, 216.0, 448.0])
    assert df == 2 and se == pytest.approx(np.std(np.log([1.10, 1.08, 1.12]), ddof=1) / math.sqrt(3))
    assert paired_log_se([100.0, 200.0], [110.0]) is None  # unequal repeats do not pair
    assert t_critical(math.inf) == pytest.approx(1.96, abs=1e-3)
    assert t_critical(2) == pytest.approx(4.303, abs=1e-3)


def test_pairs_that_share_traffic_measure_far_less_noise_than_two_groups():
    rng = np.random.default_rng(3)
    base = np.exp(rng.normal(np.log(600), 0.85, size=900))
    same_traffic = base * 0.9 * np.exp(rng.normal(0.0, 0.02, size=900))  # -10%, request by request
    unrelated = np.exp(rng.normal(np.log(540), 0.85, size=900))
    quantiles = (0.5, 0.99)
    paired = PairedBootstrap(seed=1, resamples=300).quantile_se(base, same_traffic, quantiles)
    groups = SampleBootstrap(seed=1, resamples=300).quantile_se(base, same_traffic, quantiles)
    assert np.all(paired < 0.3 * groups)
    # Unrelated pairs: pairing gains nothing and hides nothing; the noise is that of two groups.
    loose = PairedBootstrap(seed=1, resamples=300).quantile_se(base, unrelated, quantiles)
    two_groups = SampleBootstrap(seed=1, resamples=300).quantile_se(base, unrelated, quantiles)
    assert np.all(loose > 0.7 * two_groups)


def test_a_small_gain_on_the_same_seeds_is_proven_that_two_groups_cannot_tell(policy):
    # FP8 in the casebook's coding assistant: a few % faster decode on the very same traffic.
    baseline = [make_round(seed, requests=100) for seed in (1, 2, 3)]
    candidate = [make_round(seed, requests=100, decode_speed=1.05) for seed in (1, 2, 3)]
    paired = policy.decide([seeded(r, s) for r, s in zip(baseline, (1, 2, 3), strict=True)],
                           [seeded(r, s) for r, s in zip(candidate, (1, 2, 3), strict=True)], CODING_SLO, THROUGHPUT)
    assert paired.verdict is Verdict.ACCEPT
    assert any("output throughput" in line and "[paired t over 3 seeds]" in line for line in paired.reasons)
    unpaired = policy.decide(baseline, candidate, CODING_SLO, THROUGHPUT)  # no seeds: two groups
    assert not unpaired.verdict.keeps_candidate()
    assert not any("paired" in line for line in unpaired.reasons)


def test_different_seeds_are_never_paired(policy):
    baseline = [seeded(make_round(seed), seed) for seed in (1, 2, 3)]
    candidate = [seeded(make_round(seed + 10, decode_speed=1.06), seed + 10) for seed in (1, 2, 3)]
    decision = policy.decide(baseline, candidate, CODING_SLO, THROUGHPUT)
    assert not any("paired" in line for line in decision.reasons)


def test_a_tail_drop_the_slo_does_not_name_is_diminishing_returns(policy):
    # Chunk 2048 after 4096 in the simulator: decode stalls shorter (p99 and max ITL far lower), throughput
    # and the TTFT tail unchanged. The SLO names the TTFT tail and the median ITL: nothing it asks for moved.
    baseline = [seeded(make_round(seed), seed) for seed in (7, 17, 27)]
    candidate = [seeded(make_round(seed, itl_tail_scale=0.05), seed) for seed in (7, 17, 27)]
    decision = policy.decide(baseline, candidate, CODING_SLO, LATENCY)
    assert decision.figures["max_itl_ms.change"] < -0.3
    # p99 TTFT, the medians and throughput are unchanged: the label says so; max ITL is weighed apart.
    assert (decision.pattern, decision.verdict) == (Pattern.NOTHING_CHANGED, Verdict.ROLLBACK)
    assert "not one the SLO names" in decision.reasons[0]
    # An SLO on the ITL tail asks for exactly this drop, and keeps it.
    kept = policy.decide(baseline, candidate, SLO(ttft_p95_ms=4000, itl_median_ms=50, itl_p99_ms=1000), LATENCY)
    assert (kept.pattern, kept.verdict) == (Pattern.NOTHING_CHANGED, Verdict.ACCEPT)
    # Without any latency target every tail drop at flat throughput is welcome.
    assert policy.decide(baseline, candidate, SLO(), THROUGHPUT).verdict is Verdict.ACCEPT


def test_a_decision_noise_could_still_turn_is_marked_unsettled(policy):
    clear = policy.decide([make_round(1)], [make_round(2, decode_speed=0.8)], CODING_SLO, THROUGHPUT)
    assert clear.verdict is Verdict.ROLLBACK and not clear.unsettled
    # Two groups of three small rounds, throughput +3%: large enough to matter, not beyond their noise.
    baseline = [make_round(seed, requests=100) for seed in (1, 2, 3)]
    candidate = [make_round(seed + 10, requests=100, decode_speed=1.05) for seed in (1, 2, 3)]
    open_question = policy.decide(baseline, candidate, CODING_SLO, THROUGHPUT)
    assert any("output throughput" in line and ": uncertain" in line for line in open_question.reasons)
    assert open_question.unsettled and not open_question.verdict.keeps_candidate()
