"""The job report, shaped like the casebook's cumulative tables: JSON for machines, Markdown for people."""

from __future__ import annotations

import shlex
from typing import Any

import msgspec

from service.domain import Round, RoundResult
from service.engine.launch import LaunchCommand
from service.engine.measure import mean_result
from service.engine.outcome import TuningOutcome
from service.engine.slo import UNITS


def report_json(outcome: TuningOutcome, *, seed: int | None = None) -> dict[str, Any]:
    """`{"job", "rounds", "skipped", "final", "slo"}` as plain JSON-ready values."""
    job = outcome.job
    return {
        "job": {
            "id": job.id, "playbook": job.playbook, "runner": job.runner, "state": job.state.value,
            "stop_reason": job.stop_reason, "scenario": outcome.initial.name, "seed": seed,
            "rounds_used": outcome.budget.rounds_used, "max_rounds": outcome.budget.max_rounds,
            "gpu_minutes": round(outcome.budget.gpu_minutes_used, 3),
            "accepted": outcome.accepted,
        },
        "rounds": [_round_json(r) for r in job.rounds],
        "skipped": msgspec.to_builtins(outcome.skipped),
        "final": {
            "model": outcome.final.model,
            "deployment": msgspec.to_builtins(outcome.final.deployment),
            "launch_commands": msgspec.to_builtins(outcome.launch_commands),
            "router_command": msgspec.to_builtins(outcome.router_command),
            "bench": {"max_concurrency": outcome.final.bench.max_concurrency},
            "artifacts": outcome.artifacts,
            "launch_refused": outcome.launch_refused,
        },
        "slo": {"met": outcome.slo_met, "checks": msgspec.to_builtins(outcome.slo_checks)},
    }


def _round_json(round_: Round) -> dict[str, Any]:
    decision = round_.decision
    return {
        "index": round_.index,
        "technique": round_.technique,
        "state": round_.state.value,
        "retry_of": round_.retry_of,
        "delta": None if round_.delta is None else msgspec.to_builtins(round_.delta),
        "verdict": None if decision is None else decision.verdict.value,
        "pattern": None if decision is None else decision.pattern.value,
        "reasons": [] if decision is None else list(decision.reasons),
        "figures": {} if decision is None else _plain(decision.figures),
        "repeats": len(round_.results),
        # Figures are the means over the round's repeats, as the policy judged them.
        "result": None if not round_.results else _result_json(mean_result(round_.results)),
    }


def _plain(value: Any) -> Any:
    """JSON-ready copy of a policy's figures: numpy scalars (numpy.float64 subclasses float) become built-ins."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None:
        return None
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


def _result_json(result: RoundResult) -> dict[str, Any]:
    body = msgspec.to_builtins(result)
    body.pop("samples", None)  # per-request samples are for the policy, not the report
    return body


# -- Markdown ----------------------------------------------------------------------------------------------

_COLUMNS: list[tuple[str, str, Any]] = [
    ("Output tok/s", "{:.0f}", lambda r: r.bench.output_throughput),
    ("req/s", "{:.2f}", lambda r: r.bench.request_throughput),
    ("Median TTFT (ms)", "{:.0f}", lambda r: r.bench.median_ttft_ms),
    ("P99 TTFT (ms)", "{:.0f}", lambda r: r.bench.p99_ttft_ms),
    ("Median ITL (ms)", "{:.1f}", lambda r: r.bench.median_itl_ms),
    ("hit rate", "{:.2f}", lambda r: r.server.cache_hit_rate),
    ("failure", "{:.2%}", lambda r: r.failure_rate),
]


def report_markdown(outcome: TuningOutcome) -> str:
    """Per round: technique, headline metrics, change vs the baseline it was judged against, decision."""
    job = outcome.job
    lines = [f"# Tuning report: {job.playbook} on {outcome.initial.name}", "",
             f"Job `{job.id}` on runner `{job.runner}`: **{job.state.value}** ({job.stop_reason}). "
             f"{outcome.budget.rounds_used} of {outcome.budget.max_rounds} rounds, "
             f"{outcome.budget.gpu_minutes_used:.1f} GPU-minutes.", "", "## Rounds", ""]
    lines += _rounds_table(job.rounds)
    lines += ["", "## Decisions", ""]
    for round_ in job.rounds:
        if round_.decision is not None:
            summary = round_.delta.summary if round_.delta else "starting point"
            lines.append(f"- Round {round_.index} ({round_.technique}: {summary}): "
                         f"**{round_.decision.verdict.value}**. {' '.join(round_.decision.reasons)}")
    if outcome.skipped:
        lines += ["", "## Steps not run", ""]
        lines += [f"- {s.technique}: {s.reason}" for s in outcome.skipped]
    lines += ["", "## SLO assessment", ""]
    lines += _slo_lines(outcome)
    lines += ["", "## Final configuration", "", *_launch_lines(outcome)]
    for name, content in outcome.artifacts.items():
        lines += ["", f"### {name}", "", "```", content.rstrip("\n"), "```"]
    return "\n".join(lines) + "\n"


def _rounds_table(rounds: list[Round]) -> list[str]:
    header = ["Round", "Technique", *[c[0] for c in _COLUMNS], "Change vs baseline", "Decision"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    baseline: RoundResult | None = None
    first: RoundResult | None = None
    for round_ in rounds:
        result = mean_result(round_.results) if round_.results else None
        cells = [str(round_.index), round_.technique if round_.delta is None else round_.delta.summary]
        cells += [fmt.format(read(result)) if result else "-" for _, fmt, read in _COLUMNS]
        cells.append(_change(baseline, result) if baseline and result else "-")
        verdict = round_.decision.verdict.value if round_.decision else round_.state.value
        cells.append(verdict)
        lines.append("| " + " | ".join(cells) + " |")
        if round_.decision and round_.decision.verdict.keeps_candidate() and result is not None:
            baseline = result
            first = first or result
    if first is not None and baseline is not None and first is not baseline:
        lines.append("| Cumulative | | " + " | ".join("" for _ in _COLUMNS) + f" | {_change(first, baseline)} | |")
    return lines


def _change(before: RoundResult, after: RoundResult) -> str:
    parts = []
    for label, read in (("tok/s", lambda r: r.bench.output_throughput), ("p99 TTFT", lambda r: r.bench.p99_ttft_ms),
                        ("median ITL", lambda r: r.bench.median_itl_ms)):
        old, new = read(before), read(after)
        if old:
            parts.append(f"{label} {100.0 * (new - old) / old:+.1f}%")
    return ", ".join(parts)


def _slo_lines(outcome: TuningOutcome) -> list[str]:
    if not outcome.slo_checks:
        return ["No SLO targets were set."]
    lines = []
    for check in outcome.slo_checks:
        unit = UNITS.get(check.name, "")
        actual = "unmeasured" if check.actual is None else f"{check.actual:.4g}{unit}"
        mark = "met" if check.met else "NOT met"
        lines.append(f"- {check.name}: {actual} against {check.target:.4g}{unit}: {mark}")
    lines.append(f"- Overall: {'met' if outcome.slo_met else 'NOT met'}")
    return lines


def _launch_lines(outcome: TuningOutcome) -> list[str]:
    lines = [f"Model `{outcome.final.model}`; {outcome.final.deployment.total_gpus()} GPUs.", ""]
    if outcome.launch_refused:
        return [*lines, "Launch commands were refused by the flag catalogue:", "", *outcome.launch_refused]
    lines.append("```")
    commands: list[LaunchCommand] = list(outcome.launch_commands)
    if outcome.router_command is not None:
        commands.append(outcome.router_command)
    for command in commands:
        env = " ".join(f"{k}={v}" for k, v in command.env.items())
        lines.append(f"# {command.name} on {command.host}")
        lines.append((env + " " if env else "") + shlex.join(command.argv))
    lines.append("```")
    return lines
