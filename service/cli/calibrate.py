"""`sglang-tuner calibrate SCENARIO.toml --round ROUND.json`: fit the simulator's corrections to measured rounds."""

from __future__ import annotations

from pathlib import Path

import click
import msgspec

from service.calibration import Calibration, CalibrationError, Observation, fit_calibration
from service.components import CostModel
from service.domain import Provenance, RoundResult, RoundStatus, Source
from service.loadgen import read_bench_output
from service.plugin_host import PluginHost
from service.scenario import InputFileError, load_scenario

DEFAULT_COST_MODEL = "roofline"


def register(main: click.Group) -> None:
    """Add the `calibrate` command to the CLI."""
    main.add_command(calibrate_command)


@click.command("calibrate")
@click.argument("scenario_path", metavar="SCENARIO.toml", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--round", "round_paths", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              metavar="ROUND.json", help="A measured round: what `sglang-tuner round ... --json` printed (repeatable).")
@click.option("--bench-output", "bench_paths", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              metavar="FILE", help="A `bench_serving --output-file` of SCENARIO's deployment (repeatable).")
@click.option("--cost-model", default=DEFAULT_COST_MODEL, show_default=True,
              help="The cost model whose step times are corrected.")
@click.option("--json", "as_json", is_flag=True, help="Print the calibration as JSON.")
def calibrate_command(scenario_path: Path, round_paths: tuple[Path, ...], bench_paths: tuple[Path, ...],
                      cost_model: str, as_json: bool) -> None:
    """Fit prefill and decode factors and per-step and per-request overheads of the simulator so that it
    reproduces rounds measured on SCENARIO.toml's deployment; prints each with its standard error."""
    try:
        scenario = load_scenario(scenario_path)
    except InputFileError as exc:
        raise click.ClickException(str(exc)) from exc
    if not round_paths and not bench_paths:
        raise click.UsageError("give at least one measured round: --round ROUND.json or --bench-output FILE")
    rounds = [(path, _round(path)) for path in round_paths]
    observations = [Observation(scenario, result, result.provenance.seed, str(path)) for path, result in rounds]
    observations += [Observation(scenario, _bench(path), None, str(path)) for path in bench_paths]
    models: dict[str, CostModel] = PluginHost().components("cost_model")
    base = models.get(cost_model)
    if base is None or not base.available():
        known = ", ".join(sorted(name for name, m in models.items() if m.available()))
        raise click.BadParameter(f"{cost_model!r} is not an available cost model; use one of {known}",
                                 param_hint="--cost-model")
    try:
        calibration = fit_calibration(observations, base, cost_model)
    except CalibrationError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(msgspec.json.encode(calibration).decode() if as_json else render(calibration), nl=not as_json)
    if as_json:
        click.echo()


def _round(path: Path) -> RoundResult:
    try:
        return msgspec.json.decode(path.read_bytes(), type=RoundResult)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise click.BadParameter(f"{path}: not a round result ({exc}); pass what `sglang-tuner round SCENARIO "
                                 "--json` printed", param_hint="--round") from exc


def _bench(path: Path) -> RoundResult:
    try:
        figures = read_bench_output(path)
    except (OSError, ValueError, msgspec.ValidationError) as exc:
        raise click.BadParameter(f"{path}: not a bench_serving output file ({exc})",
                                 param_hint="--bench-output") from exc
    return RoundResult(status=RoundStatus.OK, bench=figures,
                       provenance=Provenance(source=Source.MEASURED, runner="bench_serving", note=str(path)))


def render(calibration: Calibration) -> str:
    """The parameters with their standard errors, then the fitted figures before and after."""
    lines = [f"calibration {calibration.id} of {calibration.cost_model} on {calibration.rounds} measured "
             f"round(s): {calibration.key.line()}", "",
             "| parameter | value | std. error | bounds |", "|---|---|---|---|"]
    for p in calibration.parameters:
        unit = "" if p.unit == "x" else " ms"
        bound = " (at a bound)" if p.at_bound else ""
        lines.append(f"| {p.name} | {p.value:.3f}{unit}{bound} | {p.stderr:.3f}{unit} | {p.lower:g} to {p.upper:g} |")
    lines += ["", "| round | figure | measured | uncalibrated | calibrated | error |", "|---|---|---|---|---|---|"]
    for r in calibration.residuals:
        lines.append(f"| {r.round} | {r.figure} | {r.measured:.4g} | {r.uncalibrated:.4g} | {r.predicted:.4g} | "
                     f"{r.error:+.1%} |")
    lines += ["", f"RMS relative error of the fitted figures: {calibration.rms_error_uncalibrated:.1%} uncalibrated, "
              f"{calibration.rms_error:.1%} calibrated ({calibration.evaluations} simulations)"]
    return "\n".join(lines)
