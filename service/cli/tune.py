"""`sglang-tuner tune`: run a playbook on a scenario and print the report (Markdown, or JSON with --json)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

import click
import msgspec

from service.cli.checks import refuse_invalid, use_ray_address
from service.cli.database import calibrated_option, db_option, stored_calibrations
from service.components import Playbook
from service.engine import JobEvent, render_markdown, report_json, run_playbook
from service.playbooks import InputFileError, check_playbook, load_playbook, playbook_scenario
from service.plugin_host import PluginHost


def register(main: click.Group) -> None:
    """Add `tune` to the CLI."""
    main.add_command(tune_command)


@click.command("tune")
@click.option("--playbook", "playbook_ref", required=True, metavar="NAME|FILE",
              help="A registered playbook name (coding-assistant, auto, ...) or a playbook .toml file.")
@click.option("--scenario", "scenario_path", type=click.Path(dir_okay=False), default=None,
              help="Scenario file to tune; defaults to the playbook's own scenario.")
@click.option("--runner", default=None, help="Runner plugin (default: the playbook's, else simulated).")
@click.option("--policy", default=None, help="Decision policy (default: the playbook's, else casebook).")
@click.option("--seed", type=int, default=0, show_default=True, help="Base seed; repeats use seed, seed+1, ...")
@click.option("--repeats", type=click.IntRange(min=1), default=None, help="Repeats per round (overrides playbook).")
@click.option("--parallel", type=click.IntRange(min=1), default=None,
              help="Most rounds measured at once (default: as many as the runner holds; 1: one after another). "
                   "The decisions are the same either way.")
@click.option("--ray-address", default=None, metavar="ADDRESS",
              help="The ray runner's cluster: ray://head:10001, auto, or local (a throwaway cluster on this host); "
                   "default: the runner setting ray_address, else RAY_ADDRESS, else local.")
@calibrated_option
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report instead of Markdown.")
@click.option("--markdown", "markdown_path", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Also write the Markdown report to this file (with --json: JSON on stdout, Markdown here).")
def tune_command(playbook_ref: str, scenario_path: str | None, runner: str | None, policy: str | None,
                 seed: int, repeats: int | None, parallel: int | None, ray_address: str | None, calibrated: bool,
                 db_url: str, as_json: bool, markdown_path: str | None) -> None:
    """Tune a deployment round by round: propose, benchmark, keep or roll back, as the casebook does."""
    use_ray_address(ray_address)
    host = PluginHost()
    try:
        playbook = _resolve_playbook(host, playbook_ref)
        check_playbook(playbook, techniques=host.components("technique"), runners=host.components("runner"),
                       policies=host.components("policy"))
        scenario = playbook_scenario(playbook, scenario_path)
    except InputFileError as exc:
        raise click.ClickException(str(exc)) from exc
    refuse_invalid(scenario, scenario_path or playbook.scenario)  # before any round: exit 2 naming the field
    try:
        outcome = asyncio.run(run_playbook(host, playbook, scenario, runner=runner, policy=policy, seed=seed,
                                           repeats=repeats, callback=_progress_printer(), parallel=parallel,
                                           calibrations=stored_calibrations(db_url, calibrated)))
    except KeyError as exc:
        raise click.ClickException(str(exc.args[0]) if exc.args else str(exc)) from exc
    # The same report the service stores and serves for a job of this playbook and seed.
    markdown = render_markdown(outcome.report)
    if markdown_path is not None:
        Path(markdown_path).write_text(markdown, encoding="utf-8")
    if as_json:
        click.echo(msgspec.json.encode(report_json(outcome.report)).decode())
    else:
        click.echo(markdown, nl=False)


def _resolve_playbook(host: PluginHost, ref: str) -> Playbook:
    path = Path(ref)
    if ref.endswith(".toml") or path.exists():
        return load_playbook(path)
    try:
        playbook: Playbook = host.get("playbook", ref)
    except KeyError as exc:
        raise click.ClickException(str(exc.args[0])) from exc
    return playbook


def _progress_printer() -> Callable[[JobEvent], None] | None:
    """Simple progress lines on stderr when it is a terminal (stdout stays a clean report)."""
    if not sys.stderr.isatty():
        return None

    def show(event: JobEvent) -> None:
        if event.kind == "round_started":
            text = f"round {event.round_index}: {event.technique}: {event.message} ..."
        elif event.kind == "round_finished":
            text = f"round {event.round_index}: {event.technique}: {event.verdict}. {event.message}"
        elif event.kind == "step_skipped":
            text = f"skip {event.technique}: {event.message}"
        else:
            text = f"{event.kind.replace('_', ' ')}: {event.message}"
        click.echo(f"[{event.rounds_done}/{event.rounds_budget}] {text}", err=True)

    return show
