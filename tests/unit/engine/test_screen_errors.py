"""How far a screened prediction was, and what the next screens trust: a prediction whose figures are off by
the same factor on the candidate and on the baseline predicted the change exactly; the job's earlier errors
widen a later prediction to their median, and to the largest of the candidate's own technique."""

from __future__ import annotations

import pytest

from service.components import Prediction
from service.domain import BenchFigures, Decision, Pattern, Provenance, RoundResult, Source, Verdict
from service.engine.screen import MAX_UNCERTAINTY, Screen, change_error, widened, with_prediction_error


def _result(tok_s: float, itl_ms: float, ttft_ms: float) -> RoundResult:
    return RoundResult(status="ok", provenance=Provenance(source=Source.SIMULATED, runner="x"),
                       bench=BenchFigures(output_throughput=tok_s, median_itl_ms=itl_ms, p95_ttft_ms=ttft_ms))


def _screen(candidate: RoundResult, baseline: RoundResult, uncertainty: float = 0.05) -> Screen:
    keep = Decision(verdict=Verdict.ACCEPT, pattern=Pattern.NOT_APPLICABLE, policy="p", reasons=["kept"])
    prediction = Prediction(results=[candidate], uncertainty=uncertainty, basis="b")
    return Screen(prediction=prediction, baseline=Prediction(results=[baseline], uncertainty=uncertainty, basis="b"),
                  decision=keep, optimistic=keep, pessimistic=keep, rank=(0, 0.0, 0.0),
                  rank_optimistic=(0, 0.0, 0.0), rank_pessimistic=(0, 0.0, 0.0))


def test_a_bias_shared_with_the_baseline_is_no_error_of_the_change() -> None:
    # Predicted 20% fast on both sides: +25% throughput and -20% ITL predicted, as measured.
    screened = _screen(_result(1500.0, 8.0, 240.0), baseline=_result(1200.0, 10.0, 300.0))
    measured, measured_baseline = [_result(1250.0, 10.0, 300.0)], [_result(1000.0, 12.5, 375.0)]
    decision = with_prediction_error(screened.decision, screened, measured, measured_baseline)
    assert decision.figures["prediction_error_output_throughput"] == pytest.approx(0.2)
    assert decision.figures["prediction_error_p95_ttft_ms"] == pytest.approx(-0.2)
    assert all(abs(decision.figures[f"change_error_{f}"]) < 1e-9
               for f in ("output_throughput", "median_itl_ms", "p95_ttft_ms"))
    assert change_error(decision) == pytest.approx(0.0)
    assert "change +25.0% predicted, +25.0% measured" in decision.reasons[-1]


def test_a_misjudged_change_is_the_error_of_the_change() -> None:
    # Predicted +100% throughput; measured +25%: the change is predicted 1.6x too large.
    screened = _screen(_result(2000.0, 10.0, 300.0), baseline=_result(1000.0, 10.0, 300.0))
    decision = with_prediction_error(screened.decision, screened, [_result(1250.0, 10.0, 300.0)],
                                     [_result(1000.0, 10.0, 300.0)])
    assert decision.figures["change_error_output_throughput"] == pytest.approx(0.6)
    assert change_error(decision) == pytest.approx(0.6)
    # Without the baseline measured on the predicted seeds, only the figures' own errors are given.
    alone = with_prediction_error(screened.decision, screened, [_result(1250.0, 10.0, 300.0)], [])
    assert change_error(alone) is None and alone.figures["prediction_error_output_throughput"] == pytest.approx(0.6)


def test_earlier_errors_widen_to_their_median_and_to_the_own_techniques_largest() -> None:
    prediction = Prediction(results=[_result(1.0, 1.0, 1.0)], uncertainty=0.05, basis="calibrated")
    errors = [("chunked_prefill", 0.04), ("quantization", 0.09), ("speculative_decoding", 1.5)]
    split = widened(prediction, "parallelism", errors)
    assert split.uncertainty == pytest.approx(0.09)  # the median: one misjudged mechanism is not every one's
    assert "median error of this job's 3 earlier predictions is 9%" in split.basis
    again = widened(prediction, "speculative_decoding", errors)
    assert again.uncertainty == MAX_UNCERTAINTY and "speculative_decoding's earlier prediction" in again.basis
    assert widened(prediction, "parallelism", []) is prediction
    assert widened(prediction, "parallelism", [("quantization", 0.01)]) is prediction  # never narrowed
