"""The policy's statistics agree with scipy's: t and normal p-values and quantiles, Welch's and the paired
t over repeats, the binomial behind the percentile intervals, and the exact test of failure rates."""

import math

import numpy as np
import pytest
from scipy import stats

from policies.noise import (
    failure_rate_test,
    normal_two_sided_p,
    student_t_two_sided_p,
    t_critical,
    t_test_p,
    welch_log_se,
)
from policies.pairing import paired_log_se
from policies.slo_interval import binomial_cdf

DFS = (1, 2, 3.5, 4, 7.25, 10, 29, 120, 1e4, math.inf)


@pytest.mark.parametrize("df", DFS)
@pytest.mark.parametrize("level", [0.5, 0.05, 0.01, 0.002])
def test_t_critical_is_scipys_t_quantile(df, level):
    assert t_critical(df, level) == pytest.approx(stats.t.ppf(1 - level / 2, df), rel=1e-12)


@pytest.mark.parametrize("df", DFS)
def test_t_critical_stays_exact_far_out_in_the_tail(df):
    # 1 - 5e-7 loses digits as a float; the critical value is read from the upper tail instead.
    assert 2 * stats.t.sf(t_critical(df, 1e-6), df) == pytest.approx(1e-6, rel=1e-9)


def test_t_critical_at_infinite_df_is_the_normal_quantile():
    assert t_critical(math.inf) == pytest.approx(stats.norm.ppf(0.975), rel=1e-14)
    assert t_critical(math.inf, 0.01) == pytest.approx(stats.norm.ppf(0.995), rel=1e-14)


@pytest.mark.parametrize("df", DFS)
@pytest.mark.parametrize("t", [0.0, 0.3, -1.7, 2.5, 6.0, -40.0])
def test_student_t_p_values_are_scipys(t, df):
    assert student_t_two_sided_p(t, df) == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-12, abs=1e-300)
    assert student_t_two_sided_p(math.inf, df) == 0.0


@pytest.mark.parametrize("z", [0.0, 0.5, -1.959964, 3.2, -8.0, 30.0])
def test_normal_p_values_are_scipys(z):
    assert normal_two_sided_p(z) == pytest.approx(2 * stats.norm.sf(abs(z)), rel=1e-12, abs=1e-300)


def test_welch_over_repeats_is_scipys_unequal_variance_t_test():
    rng = np.random.default_rng(7)
    for size_b, size_c in ((2, 2), (3, 5), (6, 4)):
        base, cand = np.exp(rng.normal(6.0, 0.05, size_b)), np.exp(rng.normal(6.04, 0.08, size_c))
        welch = welch_log_se(list(base), list(cand))
        assert welch is not None
        log_ratio = np.log(cand).mean() - np.log(base).mean()
        expected = stats.ttest_ind(np.log(cand), np.log(base), equal_var=False)
        assert log_ratio / welch[0] == pytest.approx(expected.statistic, rel=1e-10)
        assert welch[1] == pytest.approx(expected.df, rel=1e-10)
        assert t_test_p(log_ratio, *welch) == pytest.approx(expected.pvalue, rel=1e-10)


def test_the_paired_t_over_seeds_is_scipys_related_samples_t_test():
    base, cand = [100.0, 200.0, 400.0, 300.0], [110.0, 216.0, 448.0, 318.0]
    se, df = paired_log_se(base, cand)
    log_ratio = float(np.mean(np.log(cand) - np.log(base)))
    expected = stats.ttest_rel(np.log(cand), np.log(base))
    assert df == expected.df
    assert t_test_p(log_ratio, se, df) == pytest.approx(expected.pvalue, rel=1e-10)


@pytest.mark.parametrize(("n", "q"), [(1, 0.5), (100, 0.5), (500, 0.99), (1500, 0.95), (20000, 0.999)])
def test_the_binomial_behind_percentile_intervals_is_scipys(n, q):
    assert np.allclose(binomial_cdf(n, q), stats.binom.cdf(np.arange(n + 1), n, q), rtol=1e-12, atol=0)


@pytest.mark.parametrize("table", [(0, 500, 3, 500), (0, 500, 19, 500), (19, 519, 0, 500), (2, 500, 9, 1500),
                                   (7, 40, 1, 60), (250, 500, 260, 500)])
def test_the_failure_rate_test_is_fishers_exact_test(table):
    failed_b, total_b, failed_c, total_c = table
    expected = stats.fisher_exact([[failed_b, total_b - failed_b], [failed_c, total_c - failed_c]]).pvalue
    assert failure_rate_test(*table) == pytest.approx(expected, rel=1e-12)
