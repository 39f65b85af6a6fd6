"""The job report, one typed value: what the CLI prints, the store keeps, the API serves and MCP returns.

`TuningReport` is shaped like the casebook's cumulative tables. Every round's figures are the means over
its repeats, the same figures its decision was made on. `service.engine.render` turns a report into
Markdown or HTML; `load_report` reads a stored one, including reports stored before this shape (their keys
are a subset of these).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from service.domain import (
    ConfigDelta,
    Deployment,
    Job,
    Round,
    RoundResult,
    RoundState,
    RoundStatus,
    SkippedStep,
    SLOCheck,
)
from service.engine.charts import ReportCharts
from service.engine.launch import LaunchCommand
from service.engine.measure import mean_result

REPORT_FORMAT = 2


class ReportJob(msgspec.Struct, kw_only=True):
    """The job: what ran, how it ended and what it spent."""

    id: str
    playbook: str
    runner: str
    state: str
    stop_reason: str | None = None
    scenario: str = ""
    seed: int | None = None
    rounds_used: int = 0
    max_rounds: int = 0
    gpu_minutes: float = 0.0
    accepted: list[str] = msgspec.field(default_factory=list)
    created_at: datetime | None = None
    finished_at: datetime | None = None


class ReportRound(msgspec.Struct, kw_only=True):
    """One round: what was tried, the figures it was judged on (means over repeats), the decision."""

    index: int
    technique: str
    state: str
    retry_of: int | None = None
    delta: ConfigDelta | None = None
    verdict: str | None = None
    pattern: str | None = None
    reasons: list[str] = msgspec.field(default_factory=list)
    figures: dict[str, Any] = msgspec.field(default_factory=dict)
    repeats: int = 0
    result: RoundResult | None = None
    # Where the figures came from: simulated (and by which cost model), emulated, or measured.
    source: str | None = None
    # The search line it was tried on: None for the main line, else the round that started its branch.
    line: int | None = None


class ReportFinal(msgspec.Struct, kw_only=True):
    """The deployment the job ended on, with its exact launch commands."""

    model: str
    deployment: Deployment
    launch_commands: list[LaunchCommand] = msgspec.field(default_factory=list)
    router_command: LaunchCommand | None = None
    bench: dict[str, Any] = msgspec.field(default_factory=dict)
    artifacts: dict[str, str] = msgspec.field(default_factory=dict)
    launch_refused: list[str] = msgspec.field(default_factory=list)


class ReportSLO(msgspec.Struct, kw_only=True):
    """The final deployment against every SLO target."""

    met: bool
    checks: list[SLOCheck] = msgspec.field(default_factory=list)


class TuningReport(msgspec.Struct, kw_only=True):
    """A tuning job's report; `headline` holds the sentences a reader must see first."""

    job: ReportJob
    rounds: list[ReportRound] = msgspec.field(default_factory=list)
    skipped: list[SkippedStep] = msgspec.field(default_factory=list)
    final: ReportFinal | None = None
    slo: ReportSLO | None = None
    headline: list[str] = msgspec.field(default_factory=list)
    # The warnings the door's scenario check gave the starting scenario ("field: what; fix: how"): legal
    # choices that change what the rounds measure, such as a benchmark whose opening burst decides a target.
    warnings: list[str] = msgspec.field(default_factory=list)
    # For a job that missed its SLO: the capacity that would meet each missed rate target.
    capacity: list[str] = msgspec.field(default_factory=list)
    # The rounds whose kept deltas built the final deployment (the baseline round first), and the root
    # round of every branch the search walked besides the main line.
    path: list[int] = msgspec.field(default_factory=list)
    branches: list[int] = msgspec.field(default_factory=list)
    # What the charts plot: each headline figure per round, the SLO targets, every measured deployment on
    # the Pareto frontiers (`service.engine.charts`).
    charts: ReportCharts | None = None
    format: int = REPORT_FORMAT


def report_round(round_: Round) -> ReportRound:
    """A round as the report shows it: the mean over its repeats, without per-request samples."""
    decision = round_.decision
    result = None
    failed = [r for r in round_.results if r.status is not RoundStatus.OK]
    if failed:  # a failed repeat's zeros are no figures: the report shows the failure
        result = msgspec.structs.replace(failed[0], samples=type(failed[0].samples)())
    elif round_.results:
        result = msgspec.structs.replace(mean_result(round_.results), samples=type(round_.results[0].samples)())
    return ReportRound(
        index=round_.index, technique=round_.technique, state=round_.state.value, retry_of=round_.retry_of,
        delta=round_.delta, verdict=None if decision is None else decision.verdict.value,
        pattern=None if decision is None else decision.pattern.value,
        reasons=[] if decision is None else list(decision.reasons),
        figures={} if decision is None else _plain(decision.figures), repeats=len(round_.results),
        result=result, source=_source(round_.results), line=round_.line)


def _source(results: list[RoundResult]) -> str | None:
    if not results:
        return None
    provenance = results[0].provenance
    source = provenance.source.value
    return f"{source} ({provenance.cost_model})" if provenance.cost_model else source


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


def progress_report(job: Job, rounds: list[Round], *, stop_reason: str | None = None,
                    scenario: str = "") -> TuningReport:
    """The report of a job that has no final report (yet): its job line and every round so far."""
    used = sum(1 for r in rounds if r.delta is not None and r.results and r.state is not RoundState.INTERRUPTED)
    return TuningReport(
        job=ReportJob(id=job.id, playbook=job.playbook, runner=job.runner, state=job.state.value,
                      stop_reason=stop_reason or job.stop_reason, scenario=scenario, rounds_used=used,
                      created_at=job.created_at, finished_at=job.finished_at),
        rounds=[report_round(r) for r in rounds])


def load_report(raw: Any) -> TuningReport | None:
    """A stored report as a `TuningReport` (this format or the earlier one); None for anything else."""
    if raw is None:
        return None
    try:
        return msgspec.convert(raw, TuningReport)
    except (msgspec.ValidationError, TypeError):
        return None


def report_json(report: TuningReport) -> dict[str, Any]:
    """The report as plain JSON-ready values."""
    body: dict[str, Any] = msgspec.to_builtins(report)
    for round_ in body["rounds"]:
        if round_.get("result"):
            round_["result"].pop("samples", None)  # per-request samples are for the policy, not the report
    return body
