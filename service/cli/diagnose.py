"""`sglang-tuner diagnose`: read a bench_serving result the way the casebook does."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import msgspec

from service.diagnosis import Diagnosis, DiagnosisContext, DiagnosisInputError, context_from_scenario, diagnose
from service.domain import WorkloadProfile
from service.scenario import load_scenario


def register(main: click.Group) -> None:
    """Add `diagnose` to the CLI."""
    main.add_command(diagnose_command)


@click.command("diagnose")
@click.argument("bench_output", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--metrics", "metrics_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A /metrics scrape of the server (Prometheus text).")
@click.option("--scenario", "scenario_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Scenario TOML: its workload profile, SLO, model and deployment inform the reading.")
@click.option("--server-log", "log_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="SGLang server log: 'preempting' warnings and speculative accept lengths.")
@click.option("--failure-rate", type=click.FloatRange(0.0, 1.0),
              help="Share of outputs that failed to parse or validate (bench_serving does not print it).")
@click.option("--json", "as_json", is_flag=True, help="Print the diagnosis as JSON.")
def diagnose_command(bench_output: Path, metrics_path: Path | None, scenario_path: Path | None,
                     log_path: Path | None, failure_rate: float | None, as_json: bool) -> None:
    """Diagnose BENCH_OUTPUT (bench_serving's printed block or its JSON line; '-' reads stdin).

    Findings follow the casebook's reading order: concurrency vs max concurrency, median vs P99 TTFT,
    max ITL, output throughput, then token_usage and queue, utilisation, cache hit rate vs sharing rate,
    retractions and speculative accept length, then the SLO. The last line names the technique to try next.
    """
    text = sys.stdin.read() if str(bench_output) == "-" else _read(bench_output, "BENCH_OUTPUT")
    profile, context = _scenario_inputs(scenario_path, failure_rate, log_path)
    try:
        result = diagnose(text, _read(metrics_path, "--metrics") if metrics_path else None, profile, context=context)
    except DiagnosisInputError as exc:
        raise click.UsageError(str(exc)) from exc
    if as_json:
        click.echo(msgspec.json.encode(result).decode())
        return
    click.echo(render_diagnosis(result))


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}", param_hint=what) from exc


def _scenario_inputs(scenario_path: Path | None, failure_rate: float | None,
                     log_path: Path | None) -> tuple[WorkloadProfile | None, DiagnosisContext]:
    server_log = _read(log_path, "--server-log") if log_path else None
    if scenario_path is None:
        return None, DiagnosisContext(failure_rate=failure_rate, server_log=server_log)
    try:
        scenario = load_scenario(scenario_path)
    except (ValueError, msgspec.ValidationError) as exc:
        raise click.BadParameter(str(exc), param_hint="--scenario") from exc
    return scenario.workload, context_from_scenario(scenario, failure_rate=failure_rate, server_log=server_log)


def render_diagnosis(result: Diagnosis) -> str:
    """The diagnosis as text a person reads top to bottom: findings in reading order, then the next step."""
    lines = []
    for finding in result.findings:
        fix = f"  -> {finding.technique}" if finding.technique else ""
        lines.append(f"{finding.step:>2}. [{finding.severity}] {finding.title}{fix}")
        lines.append(f"    casebook ({finding.source}): \"{finding.rule}\"")
    if not result.findings:
        lines.append("No finding: the figures given show no anomaly.")
    lines.append("")
    lines.append(f"Next technique: {result.next_technique or 'none'}. {result.next_reason}")
    lines.extend(f"More input would help: {item}" for item in result.missing)
    return "\n".join(lines)
