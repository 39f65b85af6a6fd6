"""Decision quality: A/A rounds are not kept, injected regressions are rolled back, bad measurements fail."""

import msgspec
import pytest

from policies import CasebookPolicy
from service import SLO, Objective, RoundStatus, Verdict
from tests.unit.policies.policy_rounds import make_round

CODING_SLO = SLO(ttft_p95_ms=4000, itl_median_ms=50)
LATENCY = Objective(kind="latency")
THROUGHPUT = Objective(kind="throughput")


@pytest.fixture(scope="module")
def policy():
    return CasebookPolicy()


def test_aa_rounds_from_the_same_distribution_are_almost_never_kept(policy):
    decisions = [policy.decide([make_round(1000 + 2 * i)], [make_round(1001 + 2 * i)], CODING_SLO, LATENCY)
                 for i in range(50)]
    kept = [d for d in decisions if d.verdict.keeps_candidate()]
    assert len(kept) <= 1, [d.reasons[0] for d in kept]


def test_aa_rounds_with_repeats_are_almost_never_kept(policy):
    kept = 0
    for i in range(25):
        baseline = [make_round(5000 + 4 * i), make_round(5001 + 4 * i)]
        candidate = [make_round(5002 + 4 * i), make_round(5003 + 4 * i)]
        kept += policy.decide(baseline, candidate, CODING_SLO, THROUGHPUT).verdict.keeps_candidate()
    assert kept <= 1


def test_a_throughput_drop_of_15_percent_is_rolled_back(policy):
    rolled_back = 0
    for i in range(20):
        baseline, candidate = make_round(2000 + 2 * i), make_round(2001 + 2 * i, decode_speed=0.83)
        assert candidate.bench.output_throughput <= 0.87 * baseline.bench.output_throughput
        rolled_back += policy.decide([baseline], [candidate], CODING_SLO, THROUGHPUT).verdict is Verdict.ROLLBACK
    assert rolled_back >= 19


def test_capping_running_requests_raises_p99_ttft_and_is_rolled_back(policy):
    rolled_back = 0
    for i in range(20):
        baseline, candidate = make_round(3000 + 2 * i), make_round(3001 + 2 * i, running_cap=22)
        assert candidate.bench.p99_ttft_ms >= 1.2 * baseline.bench.p99_ttft_ms
        rolled_back += policy.decide([baseline], [candidate], CODING_SLO, LATENCY).verdict is Verdict.ROLLBACK
    assert rolled_back >= 19


def test_a_20_percent_ttft_rise_measured_over_two_repeats_is_rolled_back(policy):
    rolled_back = 0
    for i in range(20):
        baseline = [make_round(4000 + 4 * i), make_round(4001 + 4 * i)]
        candidate = [make_round(4002 + 4 * i, ttft_scale=1.2), make_round(4003 + 4 * i, ttft_scale=1.2)]
        rolled_back += policy.decide(baseline, candidate, CODING_SLO, LATENCY).verdict is Verdict.ROLLBACK
    assert rolled_back >= 19


def test_a_tail_only_rise_is_never_kept_even_when_noise_hides_it(policy):
    for i in range(10):
        decision = policy.decide([make_round(6000 + 2 * i)], [make_round(6001 + 2 * i, tail_scale=1.5)],
                                 CODING_SLO, LATENCY)
        assert not decision.verdict.keeps_candidate(), decision.reasons[0]


@pytest.mark.parametrize("status", [RoundStatus.FAILED, RoundStatus.PARTIAL])
@pytest.mark.parametrize("side", ["baseline", "candidate"])
def test_a_failed_or_partial_measurement_is_an_error_never_an_accept(policy, status, side):
    good = make_round(1, decode_speed=1.0)
    # Even when the broken round's figures look like a large improvement.
    broken = msgspec.structs.replace(make_round(2, decode_speed=1.5), status=status, error="server exited",
                                     error_phase="launch")
    baseline, candidate = (broken, good) if side == "baseline" else (good, broken)
    decision = policy.decide([baseline], [candidate], CODING_SLO, THROUGHPUT)
    assert decision.verdict is Verdict.ERROR
    assert "server exited" in decision.reasons[0] and "launch" in decision.reasons[0]


def test_one_failed_repeat_among_good_ones_is_still_an_error(policy):
    candidate = [make_round(3, decode_speed=1.5),
                 msgspec.structs.replace(make_round(4, decode_speed=1.5), status=RoundStatus.PARTIAL)]
    assert policy.decide([make_round(1)], candidate, CODING_SLO, THROUGHPUT).verdict is Verdict.ERROR


def test_a_round_that_completed_nothing_or_is_empty_is_an_error(policy):
    empty = msgspec.structs.replace(make_round(2), bench=msgspec.structs.replace(make_round(2).bench, completed=0))
    assert policy.decide([make_round(1)], [empty], CODING_SLO, THROUGHPUT).verdict is Verdict.ERROR
    assert policy.decide([make_round(1)], [], CODING_SLO, THROUGHPUT).verdict is Verdict.ERROR


def test_too_few_samples_is_inconclusive_and_keeps_the_baseline(policy):
    decision = policy.decide([make_round(1, requests=12)], [make_round(2, requests=12, decode_speed=1.4)],
                             CODING_SLO, THROUGHPUT)
    assert decision.verdict is Verdict.INCONCLUSIVE
    assert "too few" in decision.reasons[0]


def test_single_rounds_without_samples_cannot_be_judged(policy):
    decision = policy.decide([make_round(1, with_samples=False)],
                             [make_round(2, with_samples=False, decode_speed=1.4)], CODING_SLO, THROUGHPUT)
    assert decision.verdict is Verdict.INCONCLUSIVE


def test_repeats_without_samples_measure_noise_across_repeats(policy):
    baseline = [make_round(s, with_samples=False) for s in (1, 2, 3)]
    better = [make_round(s, with_samples=False, decode_speed=1.4, ttft_scale=0.7) for s in (4, 5, 6)]
    decision = policy.decide(baseline, better, CODING_SLO, THROUGHPUT)
    assert decision.verdict is Verdict.ACCEPT
    assert any("Welch t over 3+3 repeats" in line for line in decision.reasons)


def test_the_same_inputs_give_the_same_decision(policy):
    baseline, candidate = [make_round(1)], [make_round(2, tail_scale=0.5)]
    assert policy.decide(baseline, candidate, CODING_SLO, LATENCY) == policy.decide(baseline, candidate,
                                                                                      CODING_SLO, LATENCY)
