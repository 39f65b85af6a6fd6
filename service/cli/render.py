"""`sglang-tuner render`, `validate` and `flags`: SGLang launch commands and flag knowledge.

Thin adapters over `service.sglang`: errors print the field at fault and its fix, exit non-zero, and never
show a traceback.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import click
import msgspec

from service.domain import Scenario
from service.loadgen.bench_serving import scenario_bench_argv
from service.scenario import InputFileError, load_scenario
from service.scenario_check import check_scenario
from service.sglang import (
    ROUTER,
    ROUTER_PACKAGES,
    SGLANG,
    FlagSpec,
    Package,
    RenderRefused,
    RouterPackage,
    UnknownVersionError,
    ValidationIssue,
    catalogue_versions,
    errors,
    flag_danger,
    load_catalogue,
    render_scenario,
    replacement_status,
    router_catalogue,
    versions_with,
)

_VERSION_HELP = "Target SGLang version (default: the scenario's sglang_version)."
_ALLOW_HELP = "Allow one dangerous flag (repeatable), e.g. --allow --trust-remote-code."


def register(main: click.Group) -> None:
    """Add this module's commands to the CLI."""
    for command in (render_command, validate_command, flags_command):
        main.add_command(command)


def _scenario(path: Path) -> Scenario:
    try:
        return load_scenario(path)
    except InputFileError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot read {path}: {exc.strerror}") from None


def _issue_lines(issues: list[ValidationIssue]) -> list[str]:
    return [f"{issue.severity}: {issue}" for issue in issues]


@click.command("render")
@click.argument("scenario_path", metavar="SCENARIO.toml", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--sglang-version", "version", default=None, help=_VERSION_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the launch as JSON (workers, router, warnings).")
@click.option("--allow", "allow", multiple=True, metavar="FLAG", help=_ALLOW_HELP)
def render_command(scenario_path: Path, version: str | None, as_json: bool, allow: tuple[str, ...]) -> None:
    """Print the exact launch argv of every worker and the router for SCENARIO.toml."""
    scenario = _scenario(scenario_path)
    try:
        launch = render_scenario(scenario, sglang_version=version, allow=allow)
    except RenderRefused as refused:
        for line in _issue_lines(errors(refused.issues)):
            click.echo(line, err=True)
        raise click.ClickException(f"cannot render {scenario_path}: {len(errors(refused.issues))} problem(s) above") from None
    target = launch.router.url if launch.router is not None else launch.workers[0].url
    bench = scenario_bench_argv(scenario, target, sglang_version=launch.sglang_version)
    if as_json:
        click.echo(msgspec.json.encode({**msgspec.to_builtins(launch), "bench": bench}).decode())
        return
    click.echo(f"# sglang {launch.sglang_version}: {len(launch.workers)} worker process(es)")
    for worker in launch.workers:
        env = " ".join(f"{key}={value}" for key, value in worker.env.items())
        click.echo(f"# {worker.group}[{worker.replica}] rank {worker.node_rank} on {worker.host} -> {worker.url}")
        click.echo(f"{env} {shlex.join(worker.argv)}")
    if launch.router is not None:
        click.echo(f"# router -> {launch.router.url}")
        click.echo(shlex.join(launch.router.argv))
    click.echo(f"# benchmark of the scenario's bench -> {target}")
    click.echo(shlex.join(bench))
    for line in _issue_lines(launch.warnings):
        click.echo(line, err=True)


@click.command("validate")
@click.argument("scenario_path", metavar="SCENARIO.toml", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--sglang-version", "version", default=None, help=_VERSION_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print {valid, sglang_version, issues} as JSON.")
@click.option("--allow", "allow", multiple=True, metavar="FLAG", help=_ALLOW_HELP)
def validate_command(scenario_path: Path, version: str | None, as_json: bool, allow: tuple[str, ...]) -> None:
    """Check SCENARIO.toml (names, value ranges, flags and deployment for one SGLang version); exit 1 when invalid."""
    scenario = _scenario(scenario_path)
    target = version or scenario.sglang_version
    # The check every door runs before a round: names and value ranges as well as SGLang's flags.
    issues = check_scenario(scenario, sglang_version=target, allow=allow)
    valid = not errors(issues)
    if as_json:
        click.echo(msgspec.json.encode({"valid": valid, "sglang_version": target, "issues": issues}).decode())
    else:
        for line in _issue_lines(issues):
            click.echo(line)
        click.echo(f"{scenario_path}: {'valid' if valid else 'invalid'} for sglang {target}")
    if not valid:
        raise SystemExit(1)


@click.command("flags", context_settings={"ignore_unknown_options": True})
@click.argument("flag", required=False)
@click.option("--sglang-version", "version", default=None,
              help="SGLang version (default: the newest catalogue).")
@click.option("--router", "router", is_flag=True, help="Show the router's launch flags instead.")
@click.option("--router-package", "router_package", type=click.Choice(ROUTER_PACKAGES), default=ROUTER,
              show_default=True, help="With --router: sglang-router (sglang_router.launch_router) or smg "
                                      "(sgl-model-gateway, smg.launch_router).")
@click.option("--router-version", "router_version", default=None,
              help="With --router: the router package's version (default: its newest catalogue).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def flags_command(flag: str | None, version: str | None, router: bool, router_package: RouterPackage,
                  router_version: str | None, as_json: bool) -> None:
    """List the launch flags of one SGLang version (or router), or show one FLAG in detail."""
    try:
        catalogue = (router_catalogue(router_package, router_version) if router
                     else load_catalogue(version or catalogue_versions()[-1]))
    except UnknownVersionError as exc:
        raise click.ClickException(str(exc)) from None
    package: Package = router_package if router else SGLANG
    if flag is not None and not flag.startswith("-"):
        flag = f"--{flag}"
    if flag is None:
        if as_json:
            click.echo(msgspec.json.encode(catalogue).decode())
            return
        click.echo(f"# {catalogue.package} {catalogue.version}: {len(catalogue.flags)} flags")
        for spec in catalogue.flags:
            click.echo(f"{spec.flag:<48} {_kind(spec):<22} {_default(spec)}")
        return
    _show_flag(flag, catalogue.get(flag), catalogue.package, catalogue.version, package, as_json)


def _show_flag(flag: str, spec: FlagSpec | None, package_name: str, version: str, package: Package,
               as_json: bool) -> None:
    status = replacement_status(flag, load_catalogue(version)) if package == SGLANG else None
    present = versions_with(flag, package)
    if spec is None and status is None:
        catalogue = load_catalogue(version, package)
        nearest = catalogue.nearest(flag)
        hint = f"; did you mean {nearest}?" if nearest else ""
        raise click.ClickException(f"unknown flag {flag} for {package_name} {version}{hint}")
    danger = flag_danger(spec, package) if spec is not None else None
    if as_json:
        click.echo(msgspec.json.encode({"flag": spec, "version": version, "status": status, "danger": danger,
                                        "versions": present}).decode())
        return
    if spec is not None:
        click.echo(f"{spec.flag}  ({_kind(spec)}; default {_default(spec)})")
        for label, value in (("aliases", ", ".join(spec.aliases)), ("choices", ", ".join(map(str, spec.choices or []))),
                             ("help", spec.help)):
            if value:
                click.echo(f"  {label}: {value}")
    if status is not None:
        click.echo(f"  {'refused' if status.refused else 'warning'}: {status.message}; {status.hint}")
    if danger is not None:
        click.echo(f"  dangerous ({danger.kind}): {danger.reason}; refused unless an operator allows it")
    click.echo(f"  present in: {', '.join(present) or 'no shipped version'}")


def _kind(spec: FlagSpec) -> str:
    if spec.is_bare:
        return f"switch ({spec.action})"
    return f"{spec.type} x{spec.nargs}" if spec.nargs is not None else spec.type


def _default(spec: FlagSpec) -> str:
    return "-" if spec.default is None else str(spec.default)
