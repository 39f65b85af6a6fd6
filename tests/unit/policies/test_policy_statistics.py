"""The noise measurements behind every decision: textbook values, calibration and determinism."""

import math

import numpy as np
import pytest

from policies.noise import (
    SampleBootstrap,
    failure_rate_test,
    holm_adjust,
    normal_two_sided_p,
    student_t_two_sided_p,
    t_test_p,
    welch_log_se,
)
from tests.unit.policies.policy_rounds import make_round


@pytest.mark.parametrize(("t", "df", "p"), [(2.776, 4, 0.05), (2.228, 10, 0.05), (3.169, 10, 0.01),
                                            (1.0, 1, 0.5), (12.706, 1, 0.05)])
def test_student_t_p_values_match_the_tables(t, df, p):
    assert student_t_two_sided_p(t, df) == pytest.approx(p, abs=2e-4)


def test_normal_p_values_and_the_infinite_df_limit():
    assert normal_two_sided_p(1.959964) == pytest.approx(0.05, abs=1e-6)
    assert t_test_p(0.1, 0.1 / 2.575829) == pytest.approx(0.01, abs=1e-5)
    assert t_test_p(0.0, 0.0) == 1.0 and t_test_p(0.2, 0.0) == 0.0


def test_holm_adjusts_step_down_and_keeps_order():
    adjusted = holm_adjust({"a": 0.01, "b": 0.04, "c": 0.03})
    assert adjusted == pytest.approx({"a": 0.03, "c": 0.06, "b": 0.06})


def test_the_failure_rate_test_sees_the_casebook_failure_fix_and_not_equal_rates():
    # 3.74% of 519 requests sent failing vs none of 500 (casebook case 4).
    assert failure_rate_test(19.4, 519.4, 0, 500) < 1e-4
    assert failure_rate_test(5, 500, 5, 500) == pytest.approx(1.0)
    assert failure_rate_test(0, 500, 0, 500) == 1.0
    assert failure_rate_test(3, 0, 0, 500) == 1.0


def test_welch_over_repeats_needs_two_per_side_and_sees_deterministic_runners():
    assert welch_log_se([100.0], [120.0, 121.0]) is None
    se, df = welch_log_se([100.0, 100.0], [110.0, 110.0])
    assert se == 0.0 and math.isinf(df)
    se, df = welch_log_se([100.0, 102.0, 98.0], [110.0, 108.0, 112.0])
    assert 0.0 < se < 0.03 and 2.0 <= df <= 4.0


def test_bootstrap_noise_matches_the_spread_across_seeds():
    # The noise the policy measures from one round should be the noise another seed actually shows.
    rounds = [make_round(seed) for seed in range(60)]
    across_seeds = {
        "median": np.log([r.bench.median_ttft_ms for r in rounds]).std(ddof=1) * math.sqrt(2),
        "throughput": np.log([r.bench.output_throughput for r in rounds]).std(ddof=1) * math.sqrt(2),
    }
    boot = SampleBootstrap(seed=1, resamples=300)
    a, b = rounds[0].samples, rounds[1].samples
    measured_median = boot.quantile_se(np.array(a.ttft_ms), np.array(b.ttft_ms), (0.5,))[0]
    measured_throughput = boot.ratio_se((np.array(a.output_tokens, float), np.array(a.e2e_ms)),
                                        (np.array(b.output_tokens, float), np.array(b.e2e_ms)))
    assert measured_median == pytest.approx(across_seeds["median"], rel=0.35)
    assert measured_throughput == pytest.approx(across_seeds["throughput"], rel=0.35)


def test_the_tail_guard_never_reports_less_noise_than_the_pooled_requests_show():
    rng = np.random.default_rng(3)
    base, cand = np.exp(rng.normal(6, 0.85, 500)), np.exp(rng.normal(6, 0.85, 500))
    boot = SampleBootstrap(seed=1, resamples=300)
    median_se, p99_se = boot.quantile_se(base, cand, (0.5, 0.99))
    assert p99_se > 2 * median_se


def test_the_bootstrap_is_deterministic_for_a_seed_and_changes_with_it():
    values = np.exp(np.random.default_rng(0).normal(6, 0.6, 400))
    first = SampleBootstrap(seed=5, resamples=200).quantile_se(values, values[::-1], (0.5, 0.99))
    again = SampleBootstrap(seed=5, resamples=200).quantile_se(values, values[::-1], (0.5, 0.99))
    other = SampleBootstrap(seed=6, resamples=200).quantile_se(values, values[::-1], (0.5, 0.99))
    assert np.array_equal(first, again) and not np.array_equal(first, other)
