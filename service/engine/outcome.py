"""What a finished job hands back: the record, the final deployment, its SLO standing and the typed report."""

from __future__ import annotations

from dataclasses import dataclass, field

from service.domain import SLO, Job, Objective, RoundResult, Scenario, SkippedStep, SLOCheck, completion_hours
from service.engine.budget import Budget
from service.engine.launch import LaunchCommand, render_launch
from service.engine.report import TuningReport
from service.engine.state import EngineState, shown_skips
from service.engine.summary import FinalParts, on_path, summarise


@dataclass
class TuningOutcome:
    """The job record plus everything the report needs; `report` is what leaves the engine."""

    job: Job
    initial: Scenario
    final: Scenario
    final_results: list[RoundResult]
    skipped: list[SkippedStep]
    budget: Budget
    slo_checks: list[SLOCheck]
    report: TuningReport
    launch_commands: list[LaunchCommand] = field(default_factory=list)
    router_command: LaunchCommand | None = None
    artifacts: dict[str, str] = field(default_factory=dict)
    accepted: list[str] = field(default_factory=list)
    launch_refused: list[str] = field(default_factory=list)

    @property
    def slo_met(self) -> bool:
        """Whether the final deployment was measured and met every target (a job that measured nothing met none)."""
        return bool(self.final_results) and all(c.met for c in self.slo_checks)


def build_outcome(job: Job, initial: Scenario, state: EngineState, budget: Budget, checks: list[SLOCheck], *,
                  seed: int) -> TuningOutcome:
    """The outcome of an ended job, with its report."""
    final = state.accepted
    refused: list[str] = []
    try:
        workers, router = render_launch(final.deployment, final.hardware, final.sglang_version, final.model)
    except ValueError as exc:  # the flag catalogue refused the deployment: report why, render nothing
        workers, router, refused = [], None, [str(exc)]
    artifacts: dict[str, str] = {}
    for round_ in on_path(job, state):  # the rounds that built the final deployment, on whichever line
        if round_.delta is not None:
            artifacts.update(round_.delta.artifacts)
    parts = FinalParts(scenario=final, results=list(state.baseline), launch_commands=workers,
                       router_command=router, artifacts=artifacts, launch_refused=refused)
    report = summarise(job, initial, parts, state, budget, checks, seed=seed)
    return TuningOutcome(job=job, initial=initial, final=final, final_results=parts.results,
                         skipped=shown_skips(state.skipped), budget=budget, slo_checks=checks, report=report,
                         launch_commands=workers, router_command=router, artifacts=artifacts,
                         accepted=list(state.kept), launch_refused=refused)


def objective_met(objective: Objective, slo: SLO, results: list[RoundResult]) -> bool:
    """Whether the objective's own target is reached; without a target there is always more to gain."""
    if objective.target is None or not results:
        return False
    figure = results[0]
    target = objective.target
    if objective.kind == "throughput":
        return figure.bench.output_throughput >= target
    if objective.kind == "latency":
        return 0 < figure.bench.p95_ttft_ms <= target
    if objective.kind == "deadline":
        hours = completion_hours(figure, slo)
        return hours is not None and hours <= target
    if objective.kind == "cost":
        return figure.cost_per_1m_output_tokens is not None and figure.cost_per_1m_output_tokens <= target
    if objective.kind == "goodput":
        return figure.bench.request_goodput is not None and figure.bench.request_goodput >= target
    return figure.failure_rate <= target
