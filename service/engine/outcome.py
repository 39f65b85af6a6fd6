"""What a finished (or paused) tuning job hands back: the record, the final deployment and its SLO standing."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from service.domain import SLO, Job, Objective, RoundResult, Scenario, SLOCheck, completion_hours
from service.engine.budget import Budget
from service.engine.launch import LaunchCommand


class SkippedStep(msgspec.Struct, frozen=True, kw_only=True):
    """A playbook step that ran no round, with the casebook rule that said so."""

    technique: str
    reason: str


@dataclass
class TuningOutcome:
    """The job record plus everything the report needs."""

    job: Job
    initial: Scenario
    final: Scenario
    final_results: list[RoundResult]
    skipped: list[SkippedStep]
    budget: Budget
    slo_checks: list[SLOCheck]
    launch_commands: list[LaunchCommand] = field(default_factory=list)
    router_command: LaunchCommand | None = None
    artifacts: dict[str, str] = field(default_factory=dict)
    accepted: list[str] = field(default_factory=list)
    launch_refused: list[str] = field(default_factory=list)

    @property
    def slo_met(self) -> bool:
        return all(c.met for c in self.slo_checks)


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
    return figure.failure_rate <= target
