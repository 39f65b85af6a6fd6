"""The casebook as a measurement: each case's round-0 figures calibrate the simulator, and every later round of the
case is predicted by the calibrated simulator against the casebook's figures.

Run: `.venv/bin/python scripts/fidelity_calibrated.py` rewrites the section between the `calibrated` markers of
docs/fidelity.md (`scripts/gen_fidelity.py` writes it too, with the rest of the page). Each case's round-0
bench block (the casebook prints output throughput, median and mean TTFT and median ITL; fewer for cases 3
and 4) becomes a measured round of the case's round-0 scenario, `fit_calibration` fits the five corrections
of the cost model the simulated rounds use (aiconfigurator-core), and the `simulated` runner then runs every
row of the case's table with and without the calibration, as a job would apply it. Case 5 is not calibrated:
its round-0 scenario is 20,000 prompts on 16 nodes, and a fit simulates it about ninety times.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from gen_fidelity import METRICS, Row, rows  # noqa: E402

from service.calibration import Observation, cost_model_for, fit_calibration, simulate_with  # noqa: E402
from service.components import RoundContext  # noqa: E402
from service.domain import BenchFigures, Calibration, Provenance, RoundResult, RoundStatus, Scenario, Source  # noqa: E402
from service.plugin_host import PluginHost  # noqa: E402

START, END = "<!-- calibrated:start -->", "<!-- calibrated:end -->"
SEED = 11
# The casebook's round-0 bench_serving blocks (casebook lines 184-193, 418-425, 636-639, 811-814).
ROUND0: dict[str, dict[str, float]] = {
    "1": {"output_throughput": 1554.21, "median_ttft_ms": 612.44, "mean_ttft_ms": 842.17, "median_itl_ms": 28.41},
    "2": {"output_throughput": 1455.11, "median_ttft_ms": 1843.07, "mean_ttft_ms": 1962.44, "median_itl_ms": 14.22},
    "3": {"output_throughput": 2148.33, "median_itl_ms": 112.40},
    "4": {"output_throughput": 4128.60, "median_ttft_ms": 412.33},
}


def calibrate(case: str, scenario: Scenario, models: dict) -> Calibration:
    """A calibration of the case's round-0 scenario on the casebook's round-0 figures."""
    figures = BenchFigures(completed=scenario.bench.num_prompts, **ROUND0[case])
    measured = RoundResult(status=RoundStatus.OK, bench=figures,
                           provenance=Provenance(source=Source.MEASURED, runner="casebook", seed=SEED))
    name, base = cost_model_for(models, None, scenario)
    return fit_calibration([Observation(scenario, measured, SEED, f"casebook case {case} round 0")], base, name,
                           simulate=simulate_with)


def _ratio(before: float, after: float) -> float:
    return after / before if before else math.nan


def table(run: Callable[[Scenario, list[Calibration]], RoundResult]) -> str:
    """The calibrations, every later row of cases 1-4 predicted with and without them, and the median errors."""
    models = PluginHost().components("cost_model")
    by_case: dict[str, list[Row]] = {}
    for row in rows():
        if row.case in ROUND0:
            by_case.setdefault(row.case, []).append(row)
    cal_lines = ["| case | fitted on | parameters | RMS error of the round-0 figures |", "|---|---|---|---|"]
    lines = ["| case | change | metric | casebook | uncalibrated | calibrated | change error, uncalibrated | "
             "change error, calibrated |", "|---|---|---|---|---|---|---|---|"]
    change_errors: dict[str, list[float]] = {"uncalibrated": [], "calibrated": []}
    value_errors: dict[str, list[float]] = {"uncalibrated": [], "calibrated": []}
    for case, case_rows in by_case.items():
        calibration = calibrate(case, case_rows[0].before, models)
        shown = ", ".join(f"{p.name} {p.value:.3g}±{p.stderr:.2g}" for p in calibration.parameters)
        cal_lines.append(f"| {case} | {', '.join(f'{k} {v:g}' for k, v in ROUND0[case].items())} | {shown} | "
                         f"{calibration.rms_error_uncalibrated:.0%} -> {calibration.rms_error:.0%} |")
        for row in case_rows:
            metric = METRICS[row.metric]
            cb = _ratio(*row.casebook)
            cells = []
            for label, applied in (("uncalibrated", []), ("calibrated", [calibration])):
                before, after = run(row.before, applied), run(row.after, applied)
                if before.status == "failed" or after.status == "failed":
                    cells.append(("failed", math.nan))
                    continue
                b, a = metric(before), metric(after)
                ratio = _ratio(b, a)
                error = ratio / cb - 1 if cb and math.isfinite(ratio) else math.nan
                if math.isfinite(error):
                    change_errors[label].append(abs(error))
                if row.casebook[1]:
                    value_errors[label].append(abs(a / row.casebook[1] - 1))
                cells.append((f"{b:.4g} -> {a:.4g} (x{ratio:.2f})", error))
            lines.append(f"| {case} | {row.change} | {row.metric} | {row.casebook[0]:g} -> {row.casebook[1]:g} "
                         f"(x{cb:.2f}) | {cells[0][0]} | {cells[1][0]} | {cells[0][1]:+.0%} | {cells[1][1]:+.0%} |")
    summary = ["| median absolute error | uncalibrated | calibrated |", "|---|---|---|"]
    for label, errors in (("of the predicted change (after / before)", change_errors),
                          ("of the predicted figure after the change", value_errors)):
        summary.append(f"| {label} | {statistics.median(errors['uncalibrated']):.1%} | "
                       f"{statistics.median(errors['calibrated']):.1%} |")
    return "\n".join([*cal_lines, "", *lines, "", *summary])


def runner_with() -> Callable[[Scenario, list[Calibration]], RoundResult]:
    """The `simulated` runner with the given calibrations in its context, as a job hands them to it."""
    host = PluginHost()
    runner = host.get("runner", "simulated")
    models = host.components("cost_model")

    def run(scenario: Scenario, calibrations: list[Calibration]) -> RoundResult:
        context = RoundContext(cost_models=models, calibrations=calibrations)
        return asyncio.run(runner.run_round(scenario, seed=SEED, context=context))
    return run


def main() -> None:
    path = ROOT / "docs" / "fidelity.md"
    text = path.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{START}\n{table(runner_with())}\n{END}{tail}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
