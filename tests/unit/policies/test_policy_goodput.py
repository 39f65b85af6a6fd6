"""Goodput in a decision: the line and figures quoted when both sides report bench_serving's goodput."""

from __future__ import annotations

import msgspec
import pytest

from policies.casebook import CasebookPolicy
from service import SLO, Objective
from service.domain import RoundResult
from service.testing.rounds import make_round


def _with_goodput(result: RoundResult, rate: float, share: float) -> RoundResult:
    bench = msgspec.structs.replace(result.bench, request_goodput=rate, slo_attainment=share,
                                    goodput_slos_ms={"ttft": 800.0, "tpot": 30.0})
    return msgspec.structs.replace(result, bench=bench)


def test_the_reasons_quote_goodput_and_attainment_of_both_sides() -> None:
    baseline = [_with_goodput(make_round(s), 2.0, 0.80) for s in range(3)]
    candidate = [_with_goodput(make_round(s, decode_speed=1.3), 3.0, 0.95) for s in range(3)]
    decision = CasebookPolicy().decide(baseline, candidate, SLO(ttft_p95_ms=800, itl_median_ms=30), Objective())
    line = next(r for r in decision.reasons if r.startswith("goodput"))
    assert line == "goodput (ttft<=800ms tpot<=30.0ms): 2.00 -> 3.00 req/s, SLO attainment 80.0% -> 95.0%"
    assert decision.figures["request_goodput.baseline"] == 2.0
    assert decision.figures["request_goodput.candidate"] == 3.0
    assert decision.figures["slo_attainment.candidate"] == pytest.approx(0.95)


def test_without_goodput_on_a_side_there_is_no_line() -> None:
    baseline = [make_round(s) for s in range(2)]
    candidate = [_with_goodput(make_round(s), 3.0, 0.95) for s in range(2)]
    decision = CasebookPolicy().decide(baseline, candidate, SLO(ttft_p95_ms=800), Objective())
    assert not any(r.startswith("goodput") for r in decision.reasons)
    assert "request_goodput.candidate" not in decision.figures


def test_the_goodput_objective_judges_goodput_not_output_throughput() -> None:
    # Same traffic, same throughput; the candidate serves more of its requests within the SLO's bounds.
    baseline = [_with_goodput(make_round(s), 2.0 + 0.02 * s, 0.60) for s in range(4)]
    candidate = [_with_goodput(make_round(s), 3.0 + 0.02 * s, 0.90) for s in range(4)]
    slo = SLO(ttft_p95_ms=5000, itl_median_ms=60)
    by_goodput = CasebookPolicy().decide(baseline, candidate, slo, Objective(kind="goodput"))
    by_throughput = CasebookPolicy().decide(baseline, candidate, slo, Objective(kind="throughput"))
    assert by_goodput.verdict.keeps_candidate(), by_goodput.reasons
    assert not by_throughput.verdict.keeps_candidate(), by_throughput.reasons
