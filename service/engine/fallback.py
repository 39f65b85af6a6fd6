"""The final deployment when the round-by-round path ends on one that misses the SLO.

Each round is judged against the last accepted deployment, so a path can end on a deployment that misses
a target while an earlier measured one met them all. The job then ends on the best SLO-passing deployment
it measured, ranked by the objective (as alternatives are ranked), and the report says which round and why.

A deployment is judged on every seed it was measured on in the job, not only its own round's: the baseline
gains seeds whenever a close candidate needs them, so the starting deployment that met a p95 target on its
first two seeds and missed it on six is not brought back as "the best passing one" on the two.
"""

from __future__ import annotations

from typing import Any

import msgspec

from service.domain import RoundResult, RoundState, RoundStatus, Scenario, SLOCheck
from service.engine.alternatives import objective_figure
from service.engine.beam import techniques_on
from service.engine.slo import policy_slo_checks
from service.engine.state import EngineState


def fall_back_to_best_passing(state: EngineState, rounds: list[Any], policy: Any,
                              initial: Scenario) -> list[SLOCheck] | None:
    """Make the best SLO-passing measured deployment the final one; its SLO checks, or None if there is none."""
    best: tuple[float, int, Scenario, list[RoundResult], list[SLOCheck]] | None = None
    measured = _every_seed(state, rounds)
    for round_ in rounds:
        scenario = state.scenarios.get(round_.index)
        if scenario is None or round_.state is not RoundState.FINISHED or not round_.results:
            continue
        if any(r.status is not RoundStatus.OK for r in round_.results):
            continue
        results = measured.get(_deployment(scenario), round_.results)
        checks = policy_slo_checks(policy, results, initial.slo)
        if not checks or not all(c.met for c in checks):
            continue
        _, value, higher = objective_figure(initial.objective, initial.slo, results)
        key = -value if higher else value
        if best is None or key < best[0]:
            best = (key, round_.index, scenario, list(results), checks)
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


def _deployment(scenario: Scenario) -> bytes:
    """What was measured: the scenario less its name and description."""
    return msgspec.msgpack.encode(msgspec.structs.replace(scenario, name="", description=""))


def _every_seed(state: EngineState, rounds: list[Any]) -> dict[bytes, list[RoundResult]]:
    """Each deployment measured in the job -> its results on the most seeds (every list starts at seed 0 and
    a longer one extends a shorter one: the baseline gains the candidates' seeds in order)."""
    found: dict[bytes, list[RoundResult]] = {}

    def add(scenario: Scenario | None, results: list[RoundResult]) -> None:
        if scenario is None or not results or any(r.status is not RoundStatus.OK for r in results):
            return
        key = _deployment(scenario)
        if len(results) > len(found.get(key, [])):
            found[key] = list(results)

    for round_ in rounds:
        add(state.scenarios.get(round_.index), list(round_.results))
    for line in [*state.ends, state.snapshot()]:
        add(line.accepted, line.baseline)
    return found
