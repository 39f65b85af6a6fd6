"""The tuning engine: job and round state machines, the loop, budget, rollback, final deployment, report.

Adapters (CLI, API, MCP) build an `EngineParts` from a plugin host with `parts_from_host`, run a
`TuningEngine`, and render its `TuningOutcome` with `report_json` or `report_markdown`.
"""

from service.engine.budget import Budget
from service.engine.delta import DeltaError, apply_delta, delta_key
from service.engine.events import EventCallback, EventSink, JobEvent
from service.engine.launch import LaunchCommand, render_launch
from service.engine.loop import MAX_CONSECUTIVE_ERRORS, MAX_REPEAT_FACTOR, EngineParts, TuningEngine
from service.engine.measure import mean_result
from service.engine.outcome import SkippedStep, TuningOutcome, objective_met
from service.engine.quality import QualityVerdict, check_quality
from service.engine.report import report_json, report_markdown
from service.engine.setup import DEFAULT_POLICY, DEFAULT_RUNNER, parts_from_host, run_playbook
from service.engine.slo import slo_checks

__all__ = [
    "DEFAULT_POLICY", "DEFAULT_RUNNER", "MAX_CONSECUTIVE_ERRORS", "MAX_REPEAT_FACTOR", "Budget", "DeltaError", "EngineParts",
    "EventCallback", "EventSink", "JobEvent", "LaunchCommand", "QualityVerdict", "SkippedStep",
    "TuningEngine", "TuningOutcome", "apply_delta", "check_quality", "delta_key", "mean_result", "objective_met",
    "parts_from_host", "render_launch", "report_json", "report_markdown", "run_playbook", "slo_checks",
]
