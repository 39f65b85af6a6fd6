"""The policy contract: what the tuning engine relies on from every decision policy.

The engine hands `decide` the accepted baseline's repeats and the candidate's, seed for seed, and stores
the Decision as JSON. A policy is pure and deterministic, fails closed on measurements that are not whole
(verdict `error`, never a kept candidate), explains every decision, and hands on plain floats.
"""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

from service.components import Policy
from service.domain import SLO, Decision, Objective, Pattern, RoundResult, RoundStatus, Verdict
from service.testing.rounds import make_round

SLOS = [SLO(), SLO(ttft_p95_ms=4000, itl_median_ms=50, failure_rate_max=0.01)]
OBJECTIVES = [Objective(kind=kind) for kind in ("latency", "throughput", "deadline", "cost", "failure_rate", "goodput")]


class PolicyContract:
    """Subclass and provide a `policy` fixture to run the suite.

    The rounds are synthetic (`service.testing.make_round`): the casebook's coding assistant at 25
    concurrent streams, with one mechanism scaled at a time.
    """

    def test_decisions_name_the_policy_pattern_and_a_checkable_sentence(self, policy: Policy) -> None:
        assert isinstance(policy, Policy) and policy.name
        decision = policy.decide([make_round(1)], [make_round(2, decode_speed=1.4)], SLOS[1], OBJECTIVES[1])
        assert isinstance(decision, Decision)
        assert decision.policy == policy.name, "the report names the policy that decided"
        assert isinstance(decision.verdict, Verdict) and isinstance(decision.pattern, Pattern)
        assert decision.reasons and len(decision.reasons[0].split()) >= 6, decision.reasons
        assert all(type(v) is float for v in decision.figures.values()), "plain floats, never numpy scalars"

    @pytest.mark.parametrize(("slo", "objective"), list(zip(SLOS * 3, OBJECTIVES, strict=False)),
                             ids=[o.kind for o in OBJECTIVES])
    def test_same_inputs_same_decision_and_inputs_untouched(self, policy: Policy, slo: SLO,
                                                            objective: Objective) -> None:
        baseline = [make_round(1, gpu_hour_price=10.0)]
        candidate = [make_round(2, gpu_hour_price=10.0, tail_scale=0.4), make_round(3, gpu_hour_price=10.0)]
        before = msgspec.json.encode([baseline, candidate])
        first = policy.decide(baseline, candidate, slo, objective)
        assert policy.decide(baseline, candidate, slo, objective) == first
        assert all(type(v) is float for v in first.figures.values())
        assert msgspec.json.decode(msgspec.json.encode(first), type=Decision) == first, "the store keeps JSON"
        assert msgspec.json.encode([baseline, candidate]) == before, "decide must not modify its inputs"

    @pytest.mark.parametrize("status", [RoundStatus.FAILED, RoundStatus.PARTIAL])
    @pytest.mark.parametrize("objective", OBJECTIVES, ids=lambda o: o.kind)
    def test_a_round_whose_measurement_is_not_whole_is_an_error(self, policy: Policy, status: RoundStatus,
                                                                objective: Objective) -> None:
        promising = msgspec.structs.replace(make_round(2, decode_speed=1.6, ttft_scale=0.5), status=status)
        for baseline, candidate in (([make_round(1)], [promising]), ([promising], [make_round(1)]),
                                    ([make_round(1)], []), ([], [make_round(1)])):
            decision = policy.decide(baseline, candidate, SLOS[1], objective)
            assert decision.verdict is Verdict.ERROR, decision.reasons

    def test_the_same_round_on_both_sides_is_not_kept(self, policy: Policy) -> None:
        same = make_round(5)
        for objective in OBJECTIVES:
            assert not policy.decide([same], [same], SLOS[1], objective).verdict.keeps_candidate()

    def test_a_large_clean_improvement_is_kept_and_a_large_regression_is_not(self, policy: Policy) -> None:
        baseline = [make_round(1)]
        better = policy.decide(baseline, [make_round(2, decode_speed=1.5, ttft_scale=0.6)], SLOS[1], OBJECTIVES[1])
        worse = policy.decide(baseline, [make_round(2, decode_speed=0.7, ttft_scale=1.6)], SLOS[1], OBJECTIVES[1])
        assert better.verdict.keeps_candidate(), better.reasons[0]
        assert worse.verdict is Verdict.ROLLBACK, worse.reasons[0]

    @pytest.mark.parametrize("objective", OBJECTIVES, ids=lambda o: o.kind)
    def test_figures_are_plain_floats_even_from_numpy_measurements(self, policy: Policy,
                                                                   objective: Objective) -> None:
        slo = SLO(ttft_p95_ms=4000, itl_median_ms=50, deadline_hours=12, deadline_output_tokens=3.6e8)
        baseline = [_numpy_figures(make_round(1, gpu_hour_price=10.0))]
        candidate = [_numpy_figures(make_round(2, gpu_hour_price=10.0, decode_speed=1.3))]
        decision = policy.decide(baseline, candidate, slo, objective)
        assert decision.figures and all(type(v) is float for v in decision.figures.values())
        assert msgspec.json.decode(msgspec.json.encode(decision), type=Decision) == decision


def _numpy_figures(result: RoundResult) -> RoundResult:
    # A runner may hand over numpy scalars (they pass as floats); the decision must not pass them on.
    bench = {name: np.float64(value) for name in result.bench.__struct_fields__
             if isinstance(value := getattr(result.bench, name), float)}
    return msgspec.structs.replace(result, bench=msgspec.structs.replace(result.bench, **bench),
                                   failure_rate=np.float64(result.failure_rate))
