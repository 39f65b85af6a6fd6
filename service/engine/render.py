"""A `TuningReport` as Markdown (the CLI's and the API's, byte for byte) and as a standalone HTML page.

Every table shows the figures the decisions used: the means over a round's repeats.
"""

from __future__ import annotations

import html
import shlex
from collections.abc import Callable

from service.domain import RoundResult
from service.engine.beam import describe_path
from service.engine.launch import LaunchCommand
from service.engine.report import ReportRound, TuningReport
from service.engine.slo import target_figure

_COLUMNS: list[tuple[str, str, Callable[[RoundResult], float | None]]] = [
    ("Output tok/s", "{:.0f}", lambda r: r.bench.output_throughput),
    ("req/s", "{:.2f}", lambda r: r.bench.request_throughput),
    ("Goodput req/s", "{:.2f}", lambda r: r.bench.request_goodput),
    ("Median TTFT (ms)", "{:.0f}", lambda r: r.bench.median_ttft_ms),
    ("P99 TTFT (ms)", "{:.0f}", lambda r: r.bench.p99_ttft_ms),
    ("Median ITL (ms)", "{:.1f}", lambda r: r.bench.median_itl_ms),
    ("hit rate", "{:.2f}", lambda r: r.server.cache_hit_rate),
    ("failure", "{:.2%}", lambda r: r.failure_rate),
]
# The figures charted per round in the HTML page (bench_serving names).
CHART_FIGURES: list[tuple[str, Callable[[RoundResult], float]]] = [
    ("output_throughput", lambda r: r.bench.output_throughput),
    ("p95_ttft_ms", lambda r: r.bench.p95_ttft_ms),
    ("median_itl_ms", lambda r: r.bench.median_itl_ms),
    ("p99_e2e_latency_ms", lambda r: r.bench.p99_e2e_latency_ms),
]


def render_markdown(report: TuningReport) -> str:
    """Headline, per-round table (change vs the baseline each round was judged against), decisions, SLO, final."""
    job = report.job
    lines = [f"# Tuning report: {job.playbook} on {job.scenario}", "", *report.headline, "",
             f"Job `{job.id}` on runner `{job.runner}`: **{job.state}** ({job.stop_reason}). "
             f"{job.rounds_used} of {job.max_rounds} rounds, {job.gpu_minutes:.1f} GPU-minutes"
             + (f", seed {job.seed}." if job.seed is not None else "."), ""]
    if report.warnings:
        lines += ["## Scenario warnings", "", *[f"- {line}" for line in report.warnings], ""]
    lines += ["## Rounds", ""]
    lines += _rounds_table(report)
    lines += ["", "## Decisions", ""]
    for round_ in report.rounds:
        if round_.verdict is not None:
            summary = round_.delta.summary if round_.delta else "starting point"
            note = round_.result.provenance.note if round_.result is not None else ""
            lines.append(f"- Round {round_.index} ({round_.technique}: {summary}): **{round_.verdict}**. "
                         f"{' '.join(round_.reasons)}" + (f" Measured how: {note}." if note else ""))
    if report.skipped:
        lines += ["", "## Steps not run", ""]
        lines += [f"- {s.technique}: {s.reason}" for s in report.skipped]
    lines += ["", "## SLO assessment", "", *_slo_lines(report)]
    lines += ["", "## Final configuration", "", *_path_lines(report), *_launch_lines(report)]
    if report.final is not None:
        for name, content in report.final.artifacts.items():
            lines += ["", f"### {name}", "", "```", content.rstrip("\n"), "```"]
    return "\n".join(lines) + "\n"


def _rounds_table(report: TuningReport) -> list[str]:
    header = ["Round", "Technique", *[c[0] for c in _COLUMNS], "Change vs baseline", "Decision", "Source"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    baselines: dict[int | None, RoundResult] = {}  # each search line's last kept figures
    by_index = {r.index: r for r in report.rounds}
    for round_ in report.rounds:
        result = _measured(round_)
        line = round_.line
        if line not in baselines and line is not None and (root := _measured(by_index.get(line))) is not None:
            baselines[line] = root
        cells = [str(round_.index), _technique_cell(round_)]
        cells += [_cell(fmt, read, result) for _, fmt, read in _COLUMNS]
        paired = _paired_change(round_.figures) if result else ""
        baseline = baselines.get(line)
        cells.append(paired or (_change(baseline, result) if baseline and result else "-"))
        cells.append(round_.verdict or round_.state)
        cells.append(round_.source or "-")
        lines.append("| " + " | ".join(cells) + " |")
        if (round_.verdict in ("accept", "keep_tradeoff") or round_.delta is None) and result is not None:
            baselines[line] = result
    first, last = (_measured(by_index.get(report.path[0])), _measured(by_index.get(report.path[-1]))) \
        if report.path else (None, None)
    if first is not None and last is not None and first is not last:
        lines.append("| Cumulative | | " + " | ".join("" for _ in _COLUMNS) + f" | {_change(first, last)} | | |")
    return lines


def _cell(fmt: str, read: Callable[[RoundResult], float | None], result: RoundResult | None) -> str:
    value = read(result) if result is not None else None
    return "-" if value is None else fmt.format(value)


def _technique_cell(round_: ReportRound) -> str:
    cell = round_.technique if round_.delta is None else round_.delta.summary
    return cell if round_.line is None else f"{cell} (branch from round {round_.line})"


def _path_lines(report: TuningReport) -> list[str]:
    """Which rounds built the final deployment, and the branches the search walked besides the main line."""
    if not report.path:
        return []
    lines = [f"Reached by: {describe_path(report.rounds, report.path)}."]
    if report.branches:
        lines.append("Branches walked besides the main line: " + ", ".join(f"from round {i}" for i in report.branches)
                     + ".")
    return [*lines, ""]


def _measured(round_: ReportRound | None) -> RoundResult | None:
    """The round's figures, or None where its measurement failed (a failed run's zeros are no figures)."""
    if round_ is None:
        return None
    result = round_.result
    return result if result is not None and result.status.value == "ok" else None


# The changes the decision was made on (and its pattern label derived from), when the policy reports them.
_PAIRED = (("tok/s", "output_throughput"), ("p99 TTFT", "p99_ttft_ms"), ("median ITL", "median_itl_ms"))


def _paired_change(figures: dict[str, object]) -> str:
    parts = []
    for label, key in _PAIRED:
        change = figures.get(f"{key}.change")
        if isinstance(change, int | float):
            parts.append(f"{label} {100.0 * change:+.1f}%")
    return ", ".join(parts)


_CHANGES: list[tuple[str, Callable[[RoundResult], float]]] = [
    ("tok/s", lambda r: r.bench.output_throughput), ("p99 TTFT", lambda r: r.bench.p99_ttft_ms),
    ("median ITL", lambda r: r.bench.median_itl_ms)]


def _change(before: RoundResult, after: RoundResult) -> str:
    parts = []
    for label, read in _CHANGES:
        old, new = read(before), read(after)
        if old:
            parts.append(f"{label} {100.0 * (new - old) / old:+.1f}%")
    return ", ".join(parts)


def _slo_lines(report: TuningReport) -> list[str]:
    if report.final is None and report.job.state not in ("queued", "running"):
        return ["No deployment was measured: nothing to assess."]
    if report.slo is None:
        return ["The job has not ended: no assessment yet."]
    if not report.slo.checks:
        return ["No SLO targets were set."]
    lines = []
    for check in report.slo.checks:
        lines.append(f"- {check.name}: {target_figure(check.actual, check.name)} against "
                     f"{target_figure(check.target, check.name)}: {'met' if check.met else 'NOT met'}")
    lines.append(f"- Overall: {'met' if report.slo.met else 'NOT met'}")
    lines += [f"- Capacity: {line}" for line in report.capacity]
    return lines


def _commands(report: TuningReport) -> list[LaunchCommand]:
    if report.final is None:
        return []
    commands = list(report.final.launch_commands)
    if report.final.router_command is not None:
        commands.append(report.final.router_command)
    return commands


def _launch_lines(report: TuningReport) -> list[str]:
    final = report.final
    if final is None:
        return ["No final configuration: the starting deployment was never measured, or the job has not ended."]
    gpus = final.deployment.total_gpus()
    lines = [f"Model `{final.model}`; {gpus} GPU{'' if gpus == 1 else 's'}.", ""]
    if final.launch_refused:
        return [*lines, "Launch commands were refused by the flag catalogue:", "", *final.launch_refused]
    lines.append("```")
    for command in _commands(report):
        lines.append(f"# {command.name} on {command.host}")
        lines.append(shell_line(command))
    lines.append("```")
    return lines


def shell_line(command: LaunchCommand) -> str:
    """One process as a shell line: its environment, then its argv quoted."""
    env = " ".join(f"{k}={v}" for k, v in command.env.items())
    return (env + " " if env else "") + shlex.join(command.argv)


# -- HTML ---------------------------------------------------------------------------------------------------

_STYLE = ("body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:80em;color:#1d2330}"
          "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccd;padding:4px 8px;text-align:right}"
          "td:nth-child(2),th:nth-child(2){text-align:left}.headline{background:#f3f6fb;padding:.6em 1em}"
          "pre{background:#f6f6f6;padding:.8em;overflow-x:auto}figure{display:inline-block;margin:0 1em 1em 0}")


def render_html(report: TuningReport) -> str:
    """The report as a standalone page: headline, the rounds table, a chart per figure, SLO and launch commands."""
    job = report.job
    title = html.escape(f"Tuning report: {job.playbook} on {job.scenario}")
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ["Round", "Technique", *[c[0] for c in _COLUMNS],
                                                           "Decision", "Source"])
    rows = []
    for round_ in report.rounds:
        result = _measured(round_)
        cells = [str(round_.index), _technique_cell(round_)]
        cells += [_cell(fmt, read, result) for _, fmt, read in _COLUMNS]
        cells += [round_.verdict or round_.state, round_.source or "-"]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    headline = "".join(f"<p>{html.escape(line.replace('**', ''))}</p>" for line in report.headline)
    charts = "".join(_bar_chart(report.rounds, name, read) for name, read in CHART_FIGURES)
    slo = "".join(f"<li>{html.escape(line[2:])}</li>" for line in _slo_lines(report) if line.startswith("- "))
    warned = "".join(f"<li>{html.escape(line)}</li>" for line in report.warnings)
    commands = "\n".join(shell_line(c) for c in _commands(report))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>{_STYLE}</style>"
            f"</head><body><h1>{title}</h1><div class='headline'>{headline}</div>"
            f"<p>Job <code>{html.escape(job.id)}</code> on runner <code>{html.escape(job.runner)}</code>: "
            f"<strong>{html.escape(job.state)}</strong> ({html.escape(job.stop_reason or '')})</p>"
            + (f"<h2>Scenario warnings</h2><ul>{warned}</ul>" if warned else "")
            + f"<h2>Rounds</h2><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"{charts}<h2>SLO assessment</h2><ul>{slo}</ul>"
            f"<h2>Final configuration</h2>{''.join(f'<p>{html.escape(p)}</p>' for p in _path_lines(report) if p)}"
            f"<pre>{html.escape(commands) or 'none'}</pre></body></html>")


def _bar_chart(rounds: list[ReportRound], figure: str, read: Callable[[RoundResult], float]) -> str:
    values = [(r.index, read(result) if (result := _measured(r)) else None) for r in rounds]
    present = [v for _, v in values if v is not None]
    if not present:
        return ""
    top = max(present) or 1.0
    width, bar = 60 * len(values) + 40, 40
    bars = []
    for i, (n, value) in enumerate(values):
        if value is None:
            continue
        h = 140 * value / top
        x = 30 + 60 * i
        bars.append(f'<rect x="{x}" y="{160 - h:.1f}" width="{bar}" height="{h:.1f}" fill="#3b7dd8">'
                    f"<title>round {n}: {value:.2f}</title></rect>"
                    f'<text x="{x + bar / 2}" y="175" text-anchor="middle" font-size="11">{n}</text>'
                    f'<text x="{x + bar / 2}" y="{155 - h:.1f}" text-anchor="middle" font-size="10">{value:.4g}</text>')
    return (f"<figure><figcaption>{html.escape(figure)} (mean over repeats)</figcaption>"
            f'<svg width="{width}" height="180" role="img" aria-label="{html.escape(figure)} per round">'
            + "".join(bars) + "</svg></figure>")
