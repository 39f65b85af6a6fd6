"""Failure rates are compared with Fisher's exact test: rare failures are where the z-test goes wrong."""

import math

import numpy as np
import pytest
from scipy import stats

from policies import CasebookPolicy
from policies.noise import failure_rate_test
from service import SLO, Objective, Verdict
from tests.unit.policies.policy_rounds import make_round

THROUGHPUT = Objective(kind="throughput")


def pooled_z_p(failed_b: int, total_b: int, failed_c: int, total_c: int) -> float:
    """The two-proportion z-test (pooled), the normal approximation the exact test replaces."""
    pooled = (failed_b + failed_c) / (total_b + total_c)
    if pooled in (0.0, 1.0):
        return 1.0
    se = math.sqrt(pooled * (1 - pooled) * (1 / total_b + 1 / total_c))
    return math.erfc(abs(failed_c / total_c - failed_b / total_b) / se / math.sqrt(2))


def test_four_failures_against_none_look_significant_to_the_z_test_only():
    assert pooled_z_p(0, 500, 4, 500) < 0.05 < failure_rate_test(0, 500, 4, 500)
    assert failure_rate_test(0, 500, 4, 500) == pytest.approx(0.1243, abs=1e-4)


def test_three_failures_against_none_are_far_from_significant():
    # The z-test reads 0.08, one look away from "worse"; exactly, such a split is seen one time in four.
    assert pooled_z_p(0, 500, 3, 500) == pytest.approx(0.083, abs=1e-3)
    assert failure_rate_test(0, 500, 3, 500) == pytest.approx(0.249, abs=1e-3)


def test_nineteen_failures_against_none_are_stronger_evidence_than_the_z_test_says():
    exact, z = failure_rate_test(0, 500, 19, 500), pooled_z_p(0, 500, 19, 500)
    assert exact < 5e-6 < 1e-5 < z


def _size(test, total_b: int, total_c: int, rate: float, level: float, most: int = 25) -> float:
    """Exactly how often `test` calls two equal failure rates different at `level` (the test's size)."""
    pmf_b, pmf_c = stats.binom.pmf(np.arange(most), total_b, rate), stats.binom.pmf(np.arange(most), total_c, rate)
    return sum(pmf_b[x] * pmf_c[y] for x in range(most) for y in range(most)
               if pmf_b[x] * pmf_c[y] > 1e-15 and test(x, total_b, y, total_c) < level)


def test_the_exact_test_keeps_its_level_where_the_z_test_does_not():
    # One 200-request round against five: with 0.2% failing on both sides the z-test calls them different
    # five times as often as the improvement level (0.002) allows; the exact test never exceeds it.
    assert _size(pooled_z_p, 200, 1000, 0.002, 0.002) > 0.008
    assert _size(failure_rate_test, 200, 1000, 0.002, 0.002) <= 0.002
    assert _size(pooled_z_p, 200, 1000, 0.001, 0.05) > 0.07
    assert _size(failure_rate_test, 200, 1000, 0.001, 0.05) <= 0.05


def test_counts_from_rates_are_whole_requests():
    # 3.74% failing with 500 completed: 519 sent, 19 of them failed.
    assert failure_rate_test(19.4, 519.4, 0, 500) == failure_rate_test(19, 519, 0, 500)


def test_the_casebook_xgrammar_fix_is_accepted_on_the_failure_rate():
    # Casebook case 4, xgrammar: failures 3.74% -> 0%, median TTFT +13.7%, p99 TTFT +70%.
    baseline = make_round(1, failure_rate=0.0374)
    candidate = make_round(2, failure_rate=0.0, ttft_scale=1.137, tail_scale=1.5, decode_speed=1.066)
    decision = CasebookPolicy().decide([baseline], [candidate], SLO(), Objective(kind="latency"))
    assert decision.verdict is Verdict.ACCEPT
    assert "failure rate takes precedence over latency" in decision.reasons[0]
    assert any("Fisher's exact test" in line for line in decision.reasons)


def test_four_new_failures_in_five_hundred_do_not_roll_back_a_faster_candidate_by_themselves():
    # 0 -> 4 of 504 requests: the z-test (p = 0.046) rolled this back on the failure rate alone. Exactly,
    # p = 0.12: not proven, so the rise is uncertain and more seeds are asked for before anything is kept.
    baseline, candidate = make_round(1), make_round(2, failure_rate=4 / 504, decode_speed=1.3)
    decision = CasebookPolicy().decide([baseline], [candidate], SLO(), THROUGHPUT)
    assert decision.figures["failure_rate.p"] == pytest.approx(failure_rate_test(0, 500, 4, 504))
    assert not decision.reasons[0].startswith("failure rate")
    assert decision.unsettled
    proven = CasebookPolicy().decide([baseline], [make_round(2, failure_rate=8 / 508, decode_speed=1.3)],
                                     SLO(), THROUGHPUT)
    assert proven.verdict is Verdict.ROLLBACK and "failure rate comes first" in proven.reasons[0]
