"""Rebuilding the engine's state from the rounds a journal kept, so a restarted job continues where it stopped.

Decided rounds replay in order: a kept delta is applied again (the accepted deployment and its baseline
figures follow), every tried delta stays tried, every measured round is charged to the budget again. A
measured alternative whose group was not decided keeps its results: when its technique proposes it again,
it is judged without a new measurement. A round left open by a dead worker is interrupted; the next try of
the same delta is a new round pointing at it (`retry_of`).
"""

from __future__ import annotations

from service.domain import Round, RoundState, Scenario, Verdict
from service.engine.budget import Budget
from service.engine.delta import DeltaError, apply_delta
from service.engine.state import BASELINE_KEY, EngineState, fingerprint, round_key


def resume_state(initial: Scenario, history: list[Round], budget: Budget) -> EngineState:
    """The state after `history` (the journal's rounds in index order); charges `budget` for them."""
    state = EngineState(accepted=initial)
    for round_ in sorted(history, key=lambda r: r.index):
        key = round_key(round_)
        if round_.state in (RoundState.INTERRUPTED, RoundState.PENDING, RoundState.RUNNING):
            state.interrupted.setdefault(key, round_.index)
            continue
        candidate = _candidate(state.accepted, round_)
        if round_.results:
            if candidate is not None:
                budget.charge(round_.results, candidate.deployment.total_gpus())
            if round_.delta is not None:
                budget.count_round()
        if round_.state is RoundState.MEASURED:
            # Proposed again with its group, it is judged on these results (not filtered out as tried).
            state.awaiting_decision[key] = round_
            continue
        if round_.delta is not None:
            state.tried.add(key)
        if candidate is not None and round_.results:
            state.measured.setdefault(fingerprint(candidate), round_.index)
            state.scenarios[round_.index] = candidate
        state.interrupted.pop(key, None)
        _replay_decision(state, round_, candidate)
    return state


def _candidate(accepted: Scenario, round_: Round) -> Scenario | None:
    if round_.delta is None:
        return accepted
    try:
        return apply_delta(accepted, round_.delta)
    except DeltaError:
        return None


def _replay_decision(state: EngineState, round_: Round, candidate: Scenario | None) -> None:
    decision = round_.decision
    if decision is None:
        return
    if round_.technique == "baseline" and round_.delta is None:
        if decision.verdict.keeps_candidate():
            state.baseline = list(round_.results)
            state.baseline_measured = True
            state.errors_in_a_row = 0
        else:
            state.errors_in_a_row += 1
        state.interrupted.pop(BASELINE_KEY, None)
        return
    if round_.results:  # a candidate closed without measuring counts neither way
        state.errors_in_a_row = state.errors_in_a_row + 1 if decision.verdict is Verdict.ERROR else 0
    if decision.verdict.keeps_candidate() and candidate is not None:
        state.accepted = candidate
        state.baseline = list(round_.results)
        state.kept.append(round_.technique)
