"""A change that only turns a feature off, measured the same as the baseline, keeps the simpler deployment.

HiCache on a workload that shares no prefix pins twice the device pool in host memory and writes every
evicted page through to it, for nothing to restore: removing it measures the same, which the pattern table
calls "nothing changed, baseline kept". For a removal the technique proposed because the feature cannot pay
here, the same figures from a simpler deployment are what an engineer keeps; any other change still needs
the measurement to move.
"""

from __future__ import annotations

import pytest

from policies import CasebookPolicy
from service import SLO, ConfigDelta, Objective, Pattern, Verdict
from service.engine.alternatives import simpler_when_same
from tests.unit.policies.policy_rounds import make_round

CODING_SLO = SLO(ttft_p95_ms=4000, itl_median_ms=50)
LATENCY = Objective(kind="latency")
REMOVE = ConfigDelta(technique="hicache", summary="remove HiCache", set_server={"enable_hierarchical_cache": None},
                     simplifies=True)
CHANGE = ConfigDelta(technique="chunked_prefill", summary="chunked prefill 2048", set_server={"chunked_prefill_size": 2048})


@pytest.mark.parametrize(("base", "cand"), [((7,), (7,)), ((1, 2, 3, 4, 5, 6), (11, 12, 13, 14, 15, 16))])
def test_a_removal_that_measures_the_same_is_kept_and_any_other_flat_change_is_not(base, cand) -> None:
    # The same traffic on both sides, or six repeats each of rounds that differ only by their noise.
    decision = CasebookPolicy().decide([make_round(s) for s in base], [make_round(s) for s in cand], CODING_SLO,
                                       LATENCY)
    assert (decision.pattern, decision.verdict) == (Pattern.NOTHING_CHANGED, Verdict.ROLLBACK)
    assert decision.same_as_baseline and not decision.unsettled
    kept = simpler_when_same(REMOVE, decision)
    assert kept.verdict is Verdict.ACCEPT and kept.pattern is Pattern.NOTHING_CHANGED
    assert kept.reasons[0] == ("remove HiCache: measured the same as the baseline (every figure within noise, every "
                               "SLO target it met still met), so the simpler deployment is kept")
    assert kept.reasons[1].startswith("the policy's reading of the figures: ")
    assert simpler_when_same(CHANGE, decision) == decision


def test_a_removal_that_costs_anything_is_judged_as_measured() -> None:
    policy = CasebookPolicy()
    # Slower decoding: throughput down, ITL up. The removal is rolled back as any change would be.
    worse = policy.decide([make_round(7)], [make_round(8, decode_speed=0.7)], CODING_SLO, LATENCY)
    assert not worse.same_as_baseline and simpler_when_same(REMOVE, worse) == worse
    # A removal that measures better is the policy's to accept; the rule adds nothing to it.
    better = policy.decide([make_round(7)], [make_round(8, decode_speed=1.35, ttft_scale=0.75)], CODING_SLO, LATENCY)
    assert better.verdict is Verdict.ACCEPT and not better.same_as_baseline
    assert simpler_when_same(REMOVE, better) == better
    # Two repeats that noise cannot yet call the same: the engine measures more seeds before the rule applies.
    unsettled = policy.decide([make_round(1), make_round(2)], [make_round(5), make_round(6)], CODING_SLO, LATENCY)
    assert unsettled.pattern is Pattern.NOTHING_CHANGED and unsettled.unsettled and not unsettled.same_as_baseline
