"""How a job ends, decided once: succeeded, slo_not_met, failed (or cancelled / paused on request).

A job that ran its course ends `succeeded` only when its final deployment meets every SLO target; one
that misses a target ends `slo_not_met`, and its report says what capacity would meet a rate target at the
per-GPU rate it measured (casebook capacity calculation: required throughput / measured per-GPU rate).
A job whose starting deployment could never be measured, or whose measurements keep failing, ends
`failed` with the measured errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from service.calc.throughput import completion_hours
from service.domain import SLO, JobState, Round, RoundResult, RoundStatus, Scenario, SLOCheck
from service.engine.budget import Budget
from service.engine.measure import mean_result
from service.engine.state import EngineState


@dataclass(frozen=True)
class Ending:
    """A terminal (or paused) state and the sentence that explains it."""

    state: JobState
    reason: str


def decide_ending(state: EngineState, checks: list[SLOCheck], max_errors: int, rounds: list[Round],
                  budget: Budget, ran_reason: str) -> Ending:
    """The ending of a job that was not stopped from outside."""
    if not state.baseline_measured and state.baseline_refused:
        return Ending(JobState.FAILED, f"the starting deployment cannot launch: {state.baseline_refused} (refused "
                                       "before launch, so nothing was measured; fix the deployment and submit the "
                                       "job again)")
    if not state.baseline_measured:
        errors = _errors(rounds)
        last = errors[-1] if errors else "no result"
        faults = [r for round_ in rounds for r in round_.results if r.config_fault]
        if faults and all(r.error_phase == "load" for r in faults):
            return Ending(JobState.FAILED, f"the starting deployment cannot serve the workload: {last} (the same "
                                           "deployment refuses the same requests on every launch, so it was not "
                                           "measured again; for prompts past the KV pool, give each instance a "
                                           "larger one: more GPUs per instance, an FP8 KV cache, a smaller "
                                           "--chunked-prefill-size or a larger --mem-fraction-static; for prompts "
                                           "past the context window, shorten them; then submit the job again)")
        if faults:
            return Ending(JobState.FAILED, f"the starting deployment cannot start: {last} (a fault of the "
                                           "configuration, so it was not launched again; fix the deployment and "
                                           "submit the job again)")
        return Ending(JobState.FAILED, f"the starting deployment could not be measured ({len(errors)} attempt"
                                       f"{'' if len(errors) == 1 else 's'}): {last}")
    if state.errors_in_a_row >= max_errors:
        errors = _errors(rounds)
        return Ending(JobState.FAILED, f"measurement failed {state.errors_in_a_row} times in a row: "
                                       + (errors[-1] if errors else "no result"))
    missed = [c.name for c in checks if not c.met]
    if missed:
        return Ending(JobState.SLO_NOT_MET, f"{ran_reason}; the final deployment misses {', '.join(missed)}")
    return Ending(JobState.SUCCEEDED, ran_reason)


def _errors(rounds: list[Round]) -> list[str]:
    return [r.error or f"measurement {r.status.value}" for round_ in rounds for r in round_.results
            if r.status is not RoundStatus.OK]


def capacity_needed(final: Scenario, results: list[RoundResult], checks: list[SLOCheck]) -> list[str]:
    """For each missed rate or deadline target: the GPUs (replicas, nodes) that would meet it at the measured
    per-GPU rate, assuming replicas scale linearly behind the router (the casebook's capacity calculation)."""
    if not results:
        return []
    mean = mean_result(results)
    gpus = final.deployment.total_gpus()
    per_node = final.hardware.gpus_per_node
    lines = []
    for check in checks:
        if check.met or check.actual is None or check.actual <= 0:
            continue
        factor = _scale(check, final.slo, mean)
        if factor is None:
            continue
        needed = max(gpus, math.ceil(gpus * factor - 1e-9))
        replicas = math.ceil(needed / max(1, _gpus_per_replica(final)))
        lines.append(f"{check.name}: {check.actual:.4g} against {check.target:.4g} at {gpus} GPUs; at the measured "
                     f"{mean.bench.output_throughput / gpus:.4g} output tok/s per GPU it needs about {needed} GPUs "
                     f"({replicas} replicas of this deployment's workers, {math.ceil(needed / per_node)} nodes of "
                     f"{per_node})")
    return lines


def peak_demand(final: Scenario, results: list[RoundResult]) -> str:
    """The sentence that says the final deployment was not measured at the workload's peak request rate ("" when
    it served the peak, the SLO already sets a request-rate target, or the workload names no peak).

    Casebook case 2: "Peak 22 req/s is not met by 12.81 req/s, so either adding another node or pre-warming
    popular documents is needed"; case 4: "The peak was 40 req/s, but it can now handle 49.34 req/s". A closed
    loop of N clients serves N / (time per request) req/s, so served below the peak it says only that at the
    peak more requests would be in flight (Little's law) than any round held, at latencies no round measured.
    No GPU count is given: at more requests in flight the batches grow, so the rate per GPU is not the one
    measured.
    """
    peak = final.workload.peak_request_rate
    if not peak or not results or final.slo.min_request_throughput is not None:
        return ""
    mean = mean_result(results)
    served = mean.bench.request_throughput
    if served <= 0 or served >= PEAK_SERVED * peak:
        return ""
    held = mean.bench.concurrency or final.bench.max_concurrency or 0
    flight = (f"; at the peak about {peak * held / served:,.0f} would be (Little's law), latencies no round "
              f"measured" if held else "")
    where = f" with {held:,.0f} requests in flight" if held else ""
    return (f"The workload peaks at {peak:g} req/s; the final deployment served {served:.3g} req/s{where}{flight}. "
            f"Measure it at the peak with bench.request_rate = {peak:g}, or find the highest rate its SLO holds "
            f"with [bench.max_load] over request_rate; slo.min_request_throughput = {peak:g} makes the peak a "
            "target the job tunes for.")


# Served at least this share of the peak request rate counts as carrying it (the casebook's 139.86 of 140 req/s).
PEAK_SERVED = 0.99


def _scale(check: SLOCheck, slo: SLO, mean: RoundResult) -> float | None:
    """How many times the capacity the target needs; None for a latency target (more GPUs alone may not help)."""
    if check.name in ("min_output_throughput", "min_request_throughput"):
        return check.target / check.actual if check.actual else None
    if check.name == "deadline_hours" and slo.deadline_output_tokens and mean.bench.output_throughput > 0:
        hours = completion_hours(slo.deadline_output_tokens, mean.bench.output_throughput)
        return hours / check.target if check.target > 0 else None
    return None


def _gpus_per_replica(final: Scenario) -> int:
    replicas = sum(g.replicas for g in final.deployment.groups) or 1
    return max(1, final.deployment.total_gpus() // replicas)
