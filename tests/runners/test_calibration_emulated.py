"""Calibration against the emulator with a hidden change of its step costs (x1.8 prefill, x1.4 decode, +2 ms a
step), which the tuner never reads: calibrated on the baseline round, the simulator predicts a candidate it has
not seen (FP8 weights) within 10% on throughput and median ITL and 20% on p95 TTFT; uncalibrated it is off by
the change. Emulated time runs at the GPU's pace here: at twice the pace the emulator's own host time (HTTP,
its event loop) would count double on the emulated clock, and what a fit learns of it is noise the next round
need not repeat."""

from __future__ import annotations

import msgspec
import pytest

from service.calibration import CalibratedCostModel, Observation, fit_calibration, simulate_with
from service.domain import RoundResult
from service.plugin_host import PluginHost
from service.scenario import load_scenario
from tests.runners.conftest import EXAMPLES, cli_round

PERTURB = "decode=1.4,prefill=1.8,step_ms=2"
FIGURES = ("output_throughput", "median_itl_ms", "p95_ttft_ms")
BARS = {"output_throughput": 0.10, "median_itl_ms": 0.10, "p95_ttft_ms": 0.20}


def _measured(name: str) -> RoundResult:
    result = cli_round(f"../calibration/{name}.toml", "--runner", "local",
                       env={"SGLANG_TUNER_RUNNER_TIME_SCALE": "1.0"})
    return msgspec.convert(result, type=RoundResult)


def test_a_calibrated_simulator_predicts_an_unseen_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_TUNER_EMULATOR_PERTURB", PERTURB)
    baseline, candidate = (load_scenario(EXAMPLES.parent / "calibration" / f"{n}.toml")
                           for n in ("chat-9b", "chat-9b-fp8"))
    measured_baseline, measured = _measured("chat-9b"), _measured("chat-9b-fp8")
    assert measured_baseline.provenance.source == "emulated" and "PERTURB" not in str(msgspec.json.encode(measured))
    roofline = PluginHost(allow={"builtin_cost_models"}).components("cost_model")["roofline"]
    calibration = fit_calibration([Observation(baseline, measured_baseline, measured_baseline.provenance.seed)],
                                  roofline, "roofline")
    calibrated = simulate_with(candidate, CalibratedCostModel.of(roofline, calibration), "roofline",
                               measured.provenance.seed)
    uncalibrated = simulate_with(candidate, roofline, "roofline", measured.provenance.seed)
    assert "calibrated" in calibrated.provenance.cost_model_detail
    for figure in FIGURES:
        truth = getattr(measured.bench, figure)
        error = getattr(calibrated.bench, figure) / truth - 1
        assert abs(error) <= BARS[figure], (figure, truth, getattr(calibrated.bench, figure), calibration.describe())
    # Uncalibrated, the hidden change shows in full: FP8's throughput overstated by more than half.
    assert uncalibrated.bench.output_throughput > 1.5 * measured.bench.output_throughput
