"""`sglang-tuner calibrate SCENARIO.toml --round ROUND.json`: fit the simulator's corrections to measured rounds
and store them; `sglang-tuner calibrations list|show|delete`: the stored ones."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click
import msgspec

from service.calibration import Calibration, CalibrationError, Observation, cost_model_for, fit_calibration
from service.cli.database import db_option, with_store
from service.domain import Provenance, RoundResult, RoundStatus, Source
from service.domain.calibration import parameter_text
from service.loadgen import read_bench_output
from service.plugin_host import PluginHost
from service.scenario import InputFileError, load_scenario


def register(main: click.Group) -> None:
    """Add the `calibrate` command and the `calibrations` group to the CLI."""
    main.add_command(calibrate_command)
    main.add_command(calibrations_group)


@click.command("calibrate")
@click.argument("scenario_path", metavar="SCENARIO.toml", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--round", "round_paths", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              metavar="ROUND.json", help="A measured round: what `sglang-tuner round ... --json` printed (repeatable).")
@click.option("--bench-output", "bench_paths", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              metavar="FILE", help="A `bench_serving --output-file` of SCENARIO's deployment (repeatable).")
@click.option("--cost-model", default=None,
              help="The cost model whose step times are corrected (default: the one a simulated round of SCENARIO "
                   "uses, aiconfigurator where it has data, else roofline).")
@click.option("--store/--no-store", "keep", default=True, show_default=True,
              help="Store the calibration in --db, where the service's jobs (and `round`/`tune --calibrated`) "
                   "apply it to simulated rounds of this GPU and SGLang version.")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the calibration as JSON.")
def calibrate_command(scenario_path: Path, round_paths: tuple[Path, ...], bench_paths: tuple[Path, ...],
                      cost_model: str | None, keep: bool, db_url: str, as_json: bool) -> None:
    """Fit prefill and decode factors, per-step and per-request overheads and the host delay of the simulator
    so that it reproduces rounds measured on SCENARIO.toml's deployment; prints each with its standard error
    and stores the calibration."""
    try:
        scenario = load_scenario(scenario_path)
    except InputFileError as exc:
        raise click.ClickException(str(exc)) from exc
    if not round_paths and not bench_paths:
        raise click.UsageError("give at least one measured round: --round ROUND.json or --bench-output FILE")
    rounds = [(path, _round(path)) for path in round_paths]
    observations = [Observation(scenario, result, result.provenance.seed, str(path)) for path, result in rounds]
    observations += [Observation(scenario, _bench(path), None, str(path)) for path in bench_paths]
    try:
        name, base = cost_model_for(PluginHost().components("cost_model"), cost_model, scenario)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--cost-model") from exc
    try:
        calibration = fit_calibration(observations, base, name)
    except CalibrationError as exc:
        raise click.ClickException(str(exc)) from exc
    if keep:
        calibration = with_store(db_url, lambda store: store.save_calibration(calibration))
    click.echo(msgspec.json.encode(calibration).decode() if as_json else render(calibration))
    if keep:
        click.echo(f"stored {calibration.id}: simulated rounds of {calibration.key.gpu} and SGLang "
                   f"{calibration.key.sglang_version} on {calibration.cost_model} apply it", err=True)


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


@click.group("calibrations")
def calibrations_group() -> None:
    """The stored calibrations: what simulated rounds of their GPU and SGLang version apply."""


@calibrations_group.command("list")
@click.option("--model", default=None, help="Only this model's.")
@click.option("--gpu", default=None, help="Only this GPU's.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@db_option
def list_command(model: str | None, gpu: str | None, as_json: bool, db_url: str) -> None:
    """List calibrations, newest first: key, cost model, rounds, fit and parameters."""
    found = with_store(db_url, lambda store: store.list_calibrations(model=model, gpu=gpu))
    if as_json:
        click.echo(msgspec.json.encode(found).decode())
        return
    if not found:
        click.echo("no calibrations stored; `sglang-tuner calibrate SCENARIO.toml --round ROUND.json` fits one")
        return
    click.echo("| id | created | model | GPU | SGLang | layout | cost model | rounds | RMS error | parameters |")
    click.echo("|---|---|---|---|---|---|---|---|---|---|")
    for c in found:
        created = datetime.fromtimestamp(c.created_at, UTC).strftime("%Y-%m-%d %H:%M")
        shown = ", ".join(parameter_text(p) for p in c.parameters)
        click.echo(f"| {c.id} | {created} | {c.key.model} | {c.key.gpu} | {c.key.sglang_version} | {c.key.layout} | "
                   f"{c.cost_model} | {c.rounds} | {c.rms_error:.1%} (was {c.rms_error_uncalibrated:.1%}) | {shown} |")


@calibrations_group.command("show")
@click.argument("calibration_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@db_option
def show_command(calibration_id: str, as_json: bool, db_url: str) -> None:
    """One calibration: its parameters with their errors and every fitted figure."""
    found = with_store(db_url, lambda store: store.get_calibration(calibration_id))
    if found is None:
        raise click.ClickException(f"no calibration {calibration_id!r}; `sglang-tuner calibrations list` shows them")
    click.echo(msgspec.json.encode(found).decode() if as_json else render(found))


@calibrations_group.command("delete")
@click.argument("calibration_id")
@db_option
def delete_command(calibration_id: str, db_url: str) -> None:
    """Delete a calibration; simulated rounds no longer apply it."""
    if not with_store(db_url, lambda store: store.delete_calibration(calibration_id)):
        raise click.ClickException(f"no calibration {calibration_id!r}; `sglang-tuner calibrations list` shows them")
    click.echo(f"deleted {calibration_id}")
