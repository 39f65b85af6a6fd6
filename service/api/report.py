"""A job's report, shaped like the casebook's cumulative tables: one row per round, in JSON, Markdown, HTML."""

from __future__ import annotations

import html
from typing import Any

import msgspec

from service.domain import Round
from service.store import JobRecord

# The figures the casebook's tables carry round by round (bench_serving names).
CHART_FIGURES = ("output_throughput", "p95_ttft_ms", "median_itl_ms", "p99_e2e_latency_ms")


class ReportRow(msgspec.Struct, kw_only=True):
    """One round: what was tried, what it measured, and what the policy decided."""

    round: int
    technique: str
    summary: str
    state: str
    verdict: str | None
    pattern: str | None
    reasons: list[str]
    retry_of: int | None
    figures: dict[str, float]


class JobReport(msgspec.Struct, kw_only=True):
    """The report of a job: its end state and the cumulative table of rounds."""

    job_id: str
    playbook: str
    runner: str
    state: str
    stop_reason: str | None
    rounds: list[ReportRow]
    final: Any = None


def _figures(round_: Round) -> dict[str, float]:
    if not round_.results:
        return {}
    bench = round_.results[-1].bench
    return {name: float(getattr(bench, name)) for name in CHART_FIGURES}


def build_report(job: JobRecord, rounds: list[Round]) -> JobReport:
    """Rows for every round (interrupted ones included, so nothing vanishes), plus the engine's own report."""
    rows = [ReportRow(
        round=r.index, technique=r.technique, summary=r.delta.summary if r.delta else "", state=r.state.value,
        verdict=r.decision.verdict.value if r.decision else None,
        pattern=r.decision.pattern.value if r.decision else None,
        reasons=list(r.decision.reasons) if r.decision else [], retry_of=r.retry_of, figures=_figures(r),
    ) for r in rounds]
    return JobReport(job_id=job.id, playbook=job.playbook, runner=job.runner, state=job.state.value,
                     stop_reason=job.stop_reason, rounds=rows, final=job.report)


def render_markdown(report: JobReport) -> str:
    """The report as a Markdown document with the cumulative table."""
    lines = [f"# Tuning job {report.job_id}", "",
             f"Playbook `{report.playbook}` on runner `{report.runner}`: **{report.state}**"
             + (f" ({report.stop_reason})" if report.stop_reason else ""), "",
             "| round | technique | state | verdict | pattern | " + " | ".join(CHART_FIGURES) + " |",
             "|---|---|---|---|---|" + "---|" * len(CHART_FIGURES)]
    for row in report.rounds:
        figures = " | ".join(f"{row.figures[name]:.1f}" if name in row.figures else "" for name in CHART_FIGURES)
        lines.append(f"| {row.round} | {row.technique} | {row.state} | {row.verdict or ''} | "
                     f"{row.pattern or ''} | {figures} |")
    reasons = [(row.round, reason) for row in report.rounds for reason in row.reasons]
    if reasons:
        lines += ["", "## Decisions", ""] + [f"- round {n}: {reason}" for n, reason in reasons]
    return "\n".join(lines) + "\n"


def _bar_chart(report: JobReport, figure: str) -> str:
    values = [(row.round, row.figures.get(figure)) for row in report.rounds]
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
                    f'<text x="{x + bar / 2}" y="175" text-anchor="middle" font-size="11">{n}</text>')
    return (f"<figure><figcaption>{html.escape(figure)}</figcaption>"
            f'<svg width="{width}" height="180" role="img" aria-label="{html.escape(figure)} per round">'
            + "".join(bars) + "</svg></figure>")


def render_html(report: JobReport) -> str:
    """The report as a standalone HTML page: the table and one bar chart per figure across rounds."""
    head = ("<th>round</th><th>technique</th><th>state</th><th>verdict</th><th>pattern</th>"
            + "".join(f"<th>{html.escape(n)}</th>" for n in CHART_FIGURES))
    rows = []
    for row in report.rounds:
        cells = [str(row.round), row.technique, row.state, row.verdict or "", row.pattern or ""]
        cells += [f"{row.figures[n]:.1f}" if n in row.figures else "" for n in CHART_FIGURES]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    charts = "".join(_bar_chart(report, figure) for figure in CHART_FIGURES)
    title = html.escape(f"Tuning job {report.job_id}")
    status = html.escape(report.state + (f" ({report.stop_reason})" if report.stop_reason else ""))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head><body>"
            f"<h1>{title}</h1><p>Playbook <code>{html.escape(report.playbook)}</code> on runner "
            f"<code>{html.escape(report.runner)}</code>: <strong>{status}</strong></p>"
            f"<table border='1' cellpadding='4'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"{charts}</body></html>")


__all__ = ["JobReport", "ReportRow", "build_report", "render_html", "render_markdown"]
