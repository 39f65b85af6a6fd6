"""The charts of a job the engine has not summarised (still running, or reported before reports carried them)."""

from __future__ import annotations

import msgspec

from service.domain import Round, Scenario
from service.engine import ReportCharts, replayed_charts
from service.plugin_host import PluginHost
from service.scenario import InputFileError, load_scenario
from service.store import JobRecord


def initial_scenario(plugins: PluginHost, job: JobRecord) -> Scenario | None:
    """The scenario the job started from: the request's, else its playbook's file (None when neither decodes)."""
    raw = job.request.get("scenario")
    try:
        if raw is not None:
            return msgspec.convert(raw, Scenario)
        path = getattr(plugins.components("playbook").get(job.playbook), "scenario", None)
        return load_scenario(path) if path else None
    except (msgspec.ValidationError, InputFileError, OSError):
        return None


def job_charts(plugins: PluginHost, job: JobRecord, rounds: list[Round], chosen: int | None) -> ReportCharts | None:
    """The charts of `job` from its committed rounds; None when its starting scenario cannot be read."""
    initial = initial_scenario(plugins, job)
    return None if initial is None else replayed_charts(initial, rounds, chosen)
