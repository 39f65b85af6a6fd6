"""Building the `TuningReport` of an ended job: the headline sentences first, then the casebook's tables."""

from __future__ import annotations

from dataclasses import dataclass

from service.domain import Job, JobState, Round, RoundResult, Scenario, SLOCheck
from service.engine.budget import Budget
from service.engine.charts import build_charts
from service.engine.ending import capacity_needed, peak_demand
from service.engine.launch import LaunchCommand
from service.engine.report import ReportFinal, ReportJob, ReportSLO, TuningReport, report_round
from service.engine.slo import target_figure
from service.engine.state import EngineState, shown_skips
from service.scenario_check import check_scenario
from service.sglang.values import ValidationIssue


@dataclass
class FinalParts:
    """The final deployment, the figures it was last measured with, and what it takes to launch it."""

    scenario: Scenario
    results: list[RoundResult]
    launch_commands: list[LaunchCommand]
    router_command: LaunchCommand | None
    artifacts: dict[str, str]
    launch_refused: list[str]


def summarise(job: Job, initial: Scenario, final: FinalParts, state: EngineState, budget: Budget,
              checks: list[SLOCheck], *, seed: int) -> TuningReport:
    """The report of `job` as it ended."""
    met = all(c.met for c in checks)
    warned = _door_warnings(initial)
    capacity = ([*capacity_needed(final.scenario, final.results, checks), *state.latency_capacity]
                if job.state is JobState.SLO_NOT_MET else [])
    head = ReportJob(id=job.id, playbook=job.playbook, runner=job.runner, state=job.state.value,
                     stop_reason=job.stop_reason, scenario=initial.name, seed=seed,
                     rounds_used=budget.rounds_used, max_rounds=budget.max_rounds,
                     gpu_minutes=round(budget.gpu_minutes_used, 3), accepted=list(state.kept),
                     created_at=job.created_at, finished_at=job.finished_at)
    deployment = ReportFinal(model=final.scenario.model, deployment=final.scenario.deployment,
                             launch_commands=final.launch_commands, router_command=final.router_command,
                             bench={"max_concurrency": final.scenario.bench.max_concurrency},
                             artifacts=final.artifacts, launch_refused=final.launch_refused)
    return TuningReport(job=head, rounds=[report_round(r) for r in job.rounds], skipped=shown_skips(state.skipped),
                        final=deployment if state.baseline_measured else None,
                        # A job that measured nothing has no SLO standing at all.
                        slo=ReportSLO(met=met, checks=checks) if state.baseline_measured else None,
                        headline=_headline(job, checks, capacity, final, state, warned), capacity=capacity,
                        warnings=[_warning_line(issue) for issue in warned],
                        path=list(state.path) if state.baseline_measured else [],
                        branches=list(state.walked),
                        charts=build_charts(initial, job.rounds, state.scenarios,
                                            state.path[-1] if state.baseline_measured and state.path else None))


def _door_warnings(initial: Scenario) -> list[ValidationIssue]:
    """The door check's warnings about the starting scenario; none when the check itself fails, which must
    never cost a job its report."""
    try:
        return [issue for issue in check_scenario(initial) if issue.severity == "warning"]
    except Exception:  # a check that breaks at the end of a job leaves the report without its warnings
        return []


def _warning_line(issue: ValidationIssue) -> str:
    return f"{issue.field}: {issue.message}" + (f"; fix: {issue.hint}" if issue.hint else "")


def _about(issue: ValidationIssue, target: str) -> bool:
    """Whether a warning is about SLO target `target` (its field, or named in its message)."""
    return issue.field == f"slo.{target}" or f"slo.{target} " in issue.message


def _headline(job: Job, checks: list[SLOCheck], capacity: list[str], final: FinalParts,
              state: EngineState, warned: list[ValidationIssue]) -> list[str]:
    lines = [f"**{job.state.value}**: {job.stop_reason}."]
    if state.final_note:
        lines.append(state.final_note)
    if job.state is JobState.SLO_NOT_MET:
        missed = [c for c in checks if not c.met]
        lines.append("The final deployment does NOT meet its SLO: " + "; ".join(
            f"{c.name} {target_figure(c.actual, c.name)} against {target_figure(c.target, c.name)}" for c in missed) + ".")
        # A warning about how a missed target is measured comes before what it would take to meet it.
        lines += [f"Before round 0 the scenario check warned on {_warning_line(issue)}." for issue in warned
                  if any(_about(issue, c.name) for c in missed)]
        lines += [f"Capacity to meet it: {line}." for line in capacity]
        if not capacity:
            lines.append("No GPU count is estimated for a latency target: more replicas shorten a tail that comes "
                         "from load (queued requests, prefills competing), not the time one request takes alone; "
                         "see the rounds for the figure closest to it.")
        lines += state.gated_levers
    elif job.state is JobState.SUCCEEDED and checks:
        lines.append("The final deployment meets every SLO target.")
    if state.baseline_measured and (demand := peak_demand(final.scenario, final.results)):
        lines.append(demand)
    for round_ in on_path(job, state):
        delta = round_.delta
        if delta is not None and delta.quality_check:
            lines.append(f"Round {round_.index} ({delta.summary}): {delta.quality_check.rstrip('.')}.")
    if state.baseline_measured and (assumed := _assumed_acceptance(final)):
        lines.append(assumed)
    if final.launch_refused and state.baseline_measured:
        lines.append("The flag catalogue refused the final launch commands: " + "; ".join(final.launch_refused))
    return lines


def _assumed_acceptance(final: FinalParts) -> str:
    """A warning when the final deployment's speculative figures rest on the default draft acceptance."""
    speculative = final.scenario.workload.speculative
    drafting = any(g.server.speculative_algorithm for g in final.scenario.deployment.groups)
    simulated = any(r.provenance.source.value == "simulated" for r in final.results)
    if not drafting or not simulated or speculative.draft_acceptance is not None:
        return ""
    return (f"The final deployment's speculative decoding was simulated at an assumed draft acceptance of "
            f"{speculative.acceptance:g} per token (workload.speculative.draft_acceptance is not given): its "
            "speed-up follows that figure. State the acceptance a your draft reaches on this traffic before "
            "buying GPUs by it: a server running it with d draft steps reports `sglang:spec_accept_length` "
            "L = 1 + a + ... + a^d.")


def on_path(job: Job, state: EngineState) -> list[Round]:
    """The rounds whose deltas the final deployment carries, in order (the baseline round first)."""
    return [job.rounds[i] for i in state.path if i < len(job.rounds)]


__all__ = ["FinalParts", "on_path", "summarise"]
