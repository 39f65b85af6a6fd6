"""The final deployment when the round-by-round path ends on one that misses the SLO.

Each round is judged against the last accepted deployment, so a path can end on a deployment that misses
a target while an earlier measured one met them all. The job then ends on the best SLO-passing deployment
it measured, ranked by the objective (as alternatives are ranked), and the report says which round and why.
"""

from __future__ import annotations

from typing import Any

from service.domain import RoundResult, RoundState, RoundStatus, Scenario, SLOCheck
from service.engine.alternatives import objective_figure
from service.engine.beam import techniques_on
from service.engine.slo import policy_slo_checks
from service.engine.state import EngineState


def fall_back_to_best_passing(state: EngineState, rounds: list[Any], policy: Any,
                              initial: Scenario) -> list[SLOCheck] | None:
    """Make the best SLO-passing measured deployment the final one; its SLO checks, or None if there is none."""
    best: tuple[float, int, Scenario, list[RoundResult], list[SLOCheck]] | None = None
    for round_ in rounds:
        scenario = state.scenarios.get(round_.index)
        if scenario is None or round_.state is not RoundState.FINISHED or not round_.results:
            continue
        if any(r.status is not RoundStatus.OK for r in round_.results):
            continue
        checks = policy_slo_checks(policy, round_.results, initial.slo)
        if not checks or not all(c.met for c in checks):
            continue
        _, value, higher = objective_figure(initial.objective, initial.slo, round_.results)
        key = -value if higher else value
        if best is None or key < best[0]:
            best = (key, round_.index, scenario, list(round_.results), checks)
    if best is None:
        return None
    _, index, scenario, results, checks = best
    label, value, _ = objective_figure(initial.objective, initial.slo, results)
    state.accepted, state.baseline = scenario, results
    state.path = [*state.lineage.get(index, []), index]
    state.kept = techniques_on(rounds, state.path)
    summary = rounds[index].delta.summary if rounds[index].delta is not None else "the starting deployment"
    state.final_note = (f"The round-by-round path ended on a deployment that misses the SLO; the final "
                        f"configuration is round {index}'s ({summary}), the best SLO-passing deployment "
                        f"measured in the job ({label} {value:.4g}).")
    return checks
