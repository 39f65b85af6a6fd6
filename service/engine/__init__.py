"""The tuning engine: job and round state machines, the loop, its journal, resume, endings and the report.

Adapters (CLI, API, MCP, workers) build an `EngineParts` from a plugin host with `parts_from_host`, run a
`TuningEngine` with a `RoundJournal` (or `resume` one from the journal's rounds), and render the
`TuningReport` it hands back with `render_markdown` or `render_html`.
"""

from service.domain import SkippedStep
from service.engine.budget import Budget
from service.engine.charts import ReportCharts, build_charts, replayed_charts
from service.engine.delta import DeltaError, apply_delta, delta_key
from service.engine.ending import Ending
from service.engine.events import EventCallback, EventSink, JobEvent
from service.engine.journal import MemoryJournal, NullJournal, RoundJournal
from service.engine.launch import LaunchCommand, render_launch
from service.engine.loop import MAX_CONSECUTIVE_ERRORS, MAX_REPEAT_FACTOR, EngineParts, TuningEngine
from service.engine.measure import mean_result
from service.engine.outcome import TuningOutcome, objective_met
from service.engine.quality import QualityVerdict, check_quality
from service.engine.render import render_html, render_markdown, shell_line
from service.engine.report import TuningReport, load_report, progress_report, report_json
from service.engine.setup import DEFAULT_POLICY, DEFAULT_RUNNER, parts_from_host, round_context, run_playbook
from service.engine.slo import slo_checks


def report_markdown(outcome: TuningOutcome) -> str:
    """The Markdown of an outcome's report (the same text the API serves for the job)."""
    return render_markdown(outcome.report)


__all__ = [
    "DEFAULT_POLICY", "DEFAULT_RUNNER", "MAX_CONSECUTIVE_ERRORS", "MAX_REPEAT_FACTOR", "Budget", "DeltaError",
    "Ending", "EngineParts", "EventCallback", "EventSink", "JobEvent", "LaunchCommand", "MemoryJournal",
    "NullJournal", "QualityVerdict", "ReportCharts", "RoundJournal", "SkippedStep", "TuningEngine", "TuningOutcome",
    "TuningReport", "apply_delta", "build_charts", "check_quality", "delta_key", "load_report", "mean_result",
    "objective_met", "parts_from_host", "progress_report", "render_html", "render_launch", "render_markdown",
    "replayed_charts", "report_json", "report_markdown", "round_context", "run_playbook", "shell_line", "slo_checks",
]
