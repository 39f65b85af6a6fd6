"""Rebuilding the engine's state from the rounds a journal kept, so a restarted job continues where it stopped.

Decided rounds replay in order, each on its search line (`Round.line`, `service.engine.beam`) and on the
deployment it changed (`Round.base`): a kept delta is applied again (the line's accepted deployment and its
baseline figures follow), every tried delta stays tried on its line, an SLO-vetoed win is offered as a
branch again, and every measured round is charged to the budget again. A measured alternative whose group
was not decided keeps its results: when its technique proposes it again, it is judged without a new
measurement. A round left open by a dead worker is interrupted; the next try of the same delta is a new
round pointing at it (`retry_of`).
"""

from __future__ import annotations

from service.components import MeasuredHere
from service.domain import Round, RoundState, RoundStatus, Scenario, Verdict
from service.engine.beam import Line, branch_line, worth_a_branch
from service.engine.budget import Budget
from service.engine.delta import DeltaError, apply_delta
from service.engine.screen import change_error
from service.engine.state import BASELINE_KEY, EngineState, fingerprint, round_key


def resume_state(initial: Scenario, history: list[Round], budget: Budget) -> EngineState:
    """The state after `history` (the journal's rounds in index order); charges `budget` for them."""
    state = EngineState(accepted=initial)
    rounds = sorted(history, key=lambda r: r.index)
    lines: dict[int | None, Line] = {None: state.snapshot()}
    offers: dict[int, Line] = {}
    for round_ in rounds:
        key = round_key(round_)
        if round_.state in (RoundState.INTERRUPTED, RoundState.PENDING, RoundState.RUNNING):
            state.interrupted.setdefault(key, round_.index)
            continue
        if round_.line is not None and round_.line not in lines:
            if round_.line not in offers:
                continue  # a branch whose root is not on record: nothing to build it on
            lines[round_.line] = offers.pop(round_.line)
            state.walked.append(round_.line)
        line = lines[round_.line]
        base = _base(state, line, round_)
        candidate = _candidate(base, round_)
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
            line.tried.add(key)
        if candidate is not None and round_.results:
            state.measured.setdefault(fingerprint(candidate), round_.index)
            state.scenarios[round_.index] = candidate
            state.lineage[round_.index] = _path_to(state, line, round_)
        state.interrupted.pop(key, None)
        _replay_decision(state, line, round_, candidate)
        offer = _offer(rounds, state, line, round_, candidate)
        if offer is not None:
            offers[round_.index] = offer
    current = lines[state.walked[-1]] if state.walked else lines[None]
    state.ends = [lines[root] for root in [None, *state.walked] if lines[root] is not current]
    state.offers = [offers[root] for root in sorted(offers) if root not in lines]
    state.switch(current)
    return state


def _base(state: EngineState, line: Line, round_: Round) -> Scenario:
    """The deployment the round's delta changed: its recorded base round's, else its line's accepted one."""
    if round_.base is not None and round_.base in state.scenarios:
        return state.scenarios[round_.base]
    return line.accepted


def _path_to(state: EngineState, line: Line, round_: Round) -> list[int]:
    """The rounds whose kept deltas built the deployment this round changed."""
    if round_.delta is None:
        return []
    if round_.base is not None and round_.base in state.lineage:
        return [*state.lineage[round_.base], round_.base]
    return list(line.path)


def _candidate(accepted: Scenario, round_: Round) -> Scenario | None:
    if round_.delta is None:
        return accepted
    try:
        return apply_delta(accepted, round_.delta)
    except DeltaError:
        return None


def _offer(rounds: list[Round], state: EngineState, line: Line, round_: Round,
           candidate: Scenario | None) -> Line | None:
    decision = round_.decision
    if not worth_a_branch(decision) or not round_.results or candidate is None or round_.delta is None:
        return None
    return branch_line(rounds, round_, candidate, state.lineage.get(round_.index, list(line.path)),
                       line.inherited, line.ran)


def _replay_decision(state: EngineState, line: Line, round_: Round, candidate: Scenario | None) -> None:
    decision = round_.decision
    if decision is None:
        return
    if round_.technique == "baseline" and round_.delta is None:
        if decision.verdict.keeps_candidate():
            line.baseline = list(round_.results)
            line.path = [round_.index]
            state.lineage[round_.index] = []
            state.baseline_measured = True
            state.errors_in_a_row = 0
        elif round_.results:  # a start refused before launch measured nothing: it counts neither way
            state.errors_in_a_row += 1
        state.interrupted.pop(BASELINE_KEY, None)
        return
    if round_.results:  # a candidate closed without measuring counts neither way
        state.errors_in_a_row = state.errors_in_a_row + 1 if decision.verdict is Verdict.ERROR else 0
    if decision.verdict.keeps_candidate() and candidate is not None:
        line.accepted = candidate
        line.baseline = list(round_.results)
        line.kept.append(round_.technique)
        line.path.append(round_.index)


def remember_measured(here: MeasuredHere, state: EngineState, history: list[Round]) -> None:
    """Hand a runner that learns from the job's rounds (`hybrid`) what the job measured for real before its
    restart: every decided round's real results on the deployment it ran, in order, and how far each screened
    round's predicted change was from the measured change (the largest of its figures' errors)."""
    here.rounds.clear()
    here.prediction_errors.clear()
    here.calibration = None
    for round_ in sorted(history, key=lambda r: r.index):
        scenario = state.scenarios.get(round_.index)
        if scenario is None or round_.state not in (RoundState.FINISHED, RoundState.FAILED):
            continue
        here.rounds.extend((scenario, r) for r in round_.results if r.status is RoundStatus.OK and r.bench.completed)
        error = change_error(round_.decision) if round_.decision is not None else None
        if error is not None:
            here.prediction_errors.append((round_.technique, error))
