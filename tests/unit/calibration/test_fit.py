"""Calibration: fitting the simulator's corrections back from rounds with a known change of the step costs."""

from __future__ import annotations

import math

import msgspec
import pytest
from click.testing import CliRunner

from service.calibration import CalibratedCostModel, CalibrationError, Factors, Observation, fit_calibration
from service.calibration.fit import simulate_with
from service.cli import main
from service.domain import Provenance, RoundResult, RoundStatus, Scenario, Source
from service.emulator.server import parse_perturbation, run_emulator
from service.plugin_host import PluginHost

SCENARIO = """
name = "chat-9b"
model = "Qwen/Qwen3.6-9B"
[hardware]
gpu = "H100-SXM"
[[deployment.groups]]
replicas = 1
[deployment.groups.server]
tp-size = 1
[workload]
input = { median = 1024, p95 = 3072 }
output = { median = 160, p95 = 320 }
prefix = { system_prompt_tokens = 512 }
[bench]
num_prompts = 64
max_concurrency = 8
warmup_requests = 2
"""
HIDDEN = Factors(prefill=1.8, decode=1.4, step_ms=2.0)


@pytest.fixture(scope="module")
def roofline():
    return PluginHost(allow={"builtin_cost_models"}).components("cost_model")["roofline"]


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return msgspec.toml.decode(SCENARIO.encode(), type=Scenario)


def _with(scenario: Scenario, **fields: object) -> Scenario:
    return msgspec.structs.replace(scenario, bench=msgspec.structs.replace(scenario.bench, **fields))


def test_a_known_change_of_the_step_costs_is_fitted_back(roofline, scenario) -> None:
    measured = simulate_with(scenario, CalibratedCostModel(roofline, HIDDEN), "hidden", 0)
    calibration = fit_calibration([Observation(scenario, measured, 0, "hidden")], roofline, "roofline")
    values = {p.name: p.value for p in calibration.parameters}
    assert values["prefill"] == pytest.approx(1.8, rel=0.15)
    assert values["decode"] == pytest.approx(1.4, rel=0.15)
    assert calibration.rms_error < 0.05 < calibration.rms_error_uncalibrated
    assert all(math.isfinite(p.stderr) and p.stderr >= 0 for p in calibration.parameters)
    assert calibration.key.layout == "1x tp1" and calibration.rounds == 1
    assert "calibrated" in calibration.describe() and "decode x" in calibration.describe()


def test_a_calibration_on_two_loads_predicts_a_third(roofline, scenario) -> None:
    hidden = CalibratedCostModel(roofline, HIDDEN)
    fitted = [_with(scenario, max_concurrency=c) for c in (4, 16)]
    observations = [Observation(s, simulate_with(s, hidden, "hidden", 0), 0) for s in fitted]
    calibration = fit_calibration(observations, roofline, "roofline")
    held_out = _with(scenario, max_concurrency=8)
    truth = simulate_with(held_out, hidden, "hidden", 1).bench
    predicted = simulate_with(held_out, CalibratedCostModel.of(roofline, calibration), "roofline", 1).bench
    uncalibrated = simulate_with(held_out, roofline, "roofline", 1).bench
    assert predicted.output_throughput == pytest.approx(truth.output_throughput, rel=0.10)
    assert predicted.median_itl_ms == pytest.approx(truth.median_itl_ms, rel=0.10)
    assert predicted.p95_ttft_ms == pytest.approx(truth.p95_ttft_ms, rel=0.20)
    assert uncalibrated.output_throughput > 1.3 * truth.output_throughput


def test_rounds_that_did_not_complete_are_refused(roofline, scenario) -> None:
    failed = RoundResult(status=RoundStatus.FAILED, provenance=Provenance(source=Source.MEASURED, runner="x"))
    with pytest.raises(CalibrationError, match="no measured round completed"):
        fit_calibration([Observation(scenario, failed)], roofline, "roofline")


def test_the_emulator_perturbation_names_a_bad_part() -> None:
    assert parse_perturbation("decode=1.4, prefill=1.8,step_ms=2") == HIDDEN
    assert parse_perturbation("") is None
    with pytest.raises(ValueError, match="'speed=2' is not one of prefill, decode, step_ms, request_ms"):
        parse_perturbation("speed=2")
    assert run_emulator(["--model-path", "Qwen/Qwen3.6-9B"], {"SGLANG_TUNER_EMULATOR_PERTURB": "speed=2"}) == 2


def test_calibrate_prints_the_parameters_with_their_errors_and_stores_them(roofline, scenario, tmp_path) -> None:
    path = tmp_path / "scenario.toml"
    path.write_text(SCENARIO)
    measured = simulate_with(scenario, CalibratedCostModel(roofline, HIDDEN), "hidden", None)
    round_path = tmp_path / "round.json"
    round_path.write_bytes(msgspec.json.encode(measured))
    db = ["--db", str(tmp_path / "tuner.db")]
    result = CliRunner().invoke(main, ["calibrate", str(path), "--round", str(round_path), "--cost-model",
                                       "roofline", *db])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.startswith("| decode | "))
    assert float(row.split("|")[2]) == pytest.approx(1.4, rel=0.15)
    assert "| std. error |" in result.output
    assert "uncalibrated" in result.output
    stored = result.output.split("calibration ", 1)[1].split()[0]
    listed = CliRunner().invoke(main, ["calibrations", "list", *db])
    assert listed.exit_code == 0 and f"| {stored} |" in listed.output and "| 1x tp1 | roofline | 1 |" in listed.output
    shown = CliRunner().invoke(main, ["calibrations", "show", stored, "--json", *db])
    assert msgspec.json.decode(shown.output).get("id") == stored
    round_run = CliRunner().invoke(main, ["round", str(path), "--calibrated", "--cost-model", "roofline", "--json", *db])
    assert round_run.exit_code == 0, round_run.output
    provenance = msgspec.json.decode(round_run.output.strip().splitlines()[-1])["provenance"]
    assert provenance["calibration"] == stored
    assert CliRunner().invoke(main, ["calibrations", "delete", stored, *db]).exit_code == 0
    missing = CliRunner().invoke(main, ["calibrations", "show", stored, *db])
    assert missing.exit_code == 1 and "calibrations list" in missing.output
    bad = CliRunner().invoke(main, ["calibrate", str(path), "--round", str(path), *db])
    assert bad.exit_code == 2 and "--round" in bad.output and "not a round result" in bad.output
    none = CliRunner().invoke(main, ["calibrate", str(path), *db])
    assert none.exit_code == 2 and "--round ROUND.json or --bench-output FILE" in none.output
    unknown = CliRunner().invoke(main, ["calibrate", str(path), "--round", str(round_path), "--cost-model", "abacus",
                                        *db])
    assert unknown.exit_code == 2 and "--cost-model" in unknown.output and "roofline" in unknown.output


def test_a_host_delay_lengthens_ttft_and_not_the_steps(roofline, scenario) -> None:
    plain = simulate_with(scenario, roofline, "roofline", 0).bench
    delayed = simulate_with(scenario, CalibratedCostModel(roofline, Factors(frontend_ms=20.0)), "roofline", 0).bench
    assert delayed.median_ttft_ms >= plain.median_ttft_ms + 20.0
    assert delayed.median_itl_ms == pytest.approx(plain.median_itl_ms, rel=0.05)
    assert parse_perturbation("frontend_ms=5") == Factors(frontend_ms=5.0)
