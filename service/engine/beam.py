"""The search's lines: the main line and branches started from SLO-vetoed wins (a small beam).

The casebook engineer tries one technique per round and keeps or rolls back each change by the pattern
table; that is the main line. A candidate the policy rolls back only because of the SLO (`Decision.slo_vetoed_win`:
it improved the objective beyond noise, or it missed a target by less than the noise), or that stayed
inconclusive after the extra seeds, is a deployment the later techniques may still make pass: a casebook
fix judged alone against a baseline that the other missing fixes cripple, or a decision the traffic seed
would make. It is kept as an offer. When the main line has run its steps, the offers are walked as
branches, earliest first (the branch from the earliest contested decision re-examines every later one),
each from its candidate with the techniques its line had not yet run, under the same budget; the
playbook's `beam_width` counts the lines (1 turns branching off). The job ends on the best line that
meets every SLO target, ranked by the objective, a branch replacing the main line only beyond noise; when
none meets them, on the line whose end the policy keeps against the others' (`choose_line`).

A line's state is its accepted deployment, the figures it was measured with, the deltas tried on it and the
rounds kept on it (its path). Everything here follows from the rounds alone, so a resumed job rebuilds its
lines from the journal (`service.engine.resume`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from service.domain import ConfigDelta, Decision, Round, RoundResult, Scenario, SLOCheck, Verdict
from service.engine.alternatives import beats, objective_figure, objective_key
from service.engine.delta import delta_key
from service.engine.slo import policy_slo_checks, target_figure

if TYPE_CHECKING:
    from service.engine.state import EngineState


@dataclass
class Line:
    """One line of the search: where it stands, what was tried on it, and the rounds that built it."""

    root: int | None  # None: the main line; else the round whose SLO-vetoed candidate starts the branch
    accepted: Scenario
    baseline: list[RoundResult]
    tried: set[str] = field(default_factory=set)
    kept: list[str] = field(default_factory=list)
    path: list[int] = field(default_factory=list)  # the baseline round, then every round kept on this line
    # Delta keys tried on the lines this one branched from, up to its root (never tried again on it).
    inherited: set[str] = field(default_factory=set)
    # Techniques its parent lines ran before its root: the branch runs the others, and its root's again.
    ran: list[str] = field(default_factory=list)

    def pending(self, steps: list[str], root_technique: str | None) -> list[str]:
        """The playbook steps this line still runs, in the playbook's order."""
        return [s for s in steps if s == root_technique or s not in self.ran]


def worth_a_branch(decision: Decision | None) -> bool:
    """A measured candidate that only the SLO kept out (`Decision.slo_vetoed_win`), or that stayed
    inconclusive after the extra seeds: the seed, not the figures, would decide the job's path."""
    if decision is None:
        return False
    return decision.slo_vetoed_win or decision.verdict is Verdict.INCONCLUSIVE


def branch_line(rounds: list[Round], root: Round, candidate: Scenario, path: list[int],
                parent_inherited: set[str], parent_ran: list[str]) -> Line:
    """The branch that adopts `root`'s candidate, on the path `root` was tried on (its lineage).

    It follows from the rounds alone (the same live and on a resume): the deltas tried on its parent line up
    to its root are tried on it too, and the techniques its parent line ran before the root are done on it.
    """
    keys = {delta_key(r.delta) for r in rounds
            if r.delta is not None and r.line == root.line and r.index <= root.index}
    ran = [*parent_ran, *(t for t in techniques_before(rounds, root.line, root.index) if t not in parent_ran)]
    full = [*path, root.index]
    inherited = parent_inherited | keys
    return Line(root=root.index, accepted=candidate, baseline=list(root.results), tried=set(inherited),
                kept=techniques_on(rounds, full), path=full, inherited=inherited, ran=[t for t in ran if t != root.technique])


def techniques_before(rounds: list[Round], line: int | None, before: int) -> list[str]:
    """The techniques with a round on `line` before round `before` (the baseline excluded)."""
    seen: list[str] = []
    for round_ in rounds:
        if round_.index < before and round_.line == line and round_.delta is not None \
                and round_.technique not in seen:
            seen.append(round_.technique)
    return seen


def techniques_on(rounds: list[Round], path: list[int]) -> list[str]:
    """The techniques whose deltas the rounds of `path` kept, in order (the baseline round has none)."""
    return [rounds[i].technique for i in path if i < len(rounds) and rounds[i].delta is not None]


class _WithDelta(Protocol):
    @property
    def delta(self) -> ConfigDelta | None: ...


def describe_path(rounds: Sequence[_WithDelta], path: list[int]) -> str:
    """"round 0 (starting point) -> round 3 (chunked prefill 4096) -> ..." (rounds, or report rounds, by index)."""
    parts = []
    for index in path:
        delta = rounds[index].delta if index < len(rounds) else None
        parts.append(f"round {index} ({delta.summary if delta is not None else 'starting point'})")
    return " -> ".join(parts)


def choose_line(state: EngineState, rounds: list[Round], policy: Any, initial: Scenario) -> None:
    """End on the best line the search walked, taken in the order they were walked (the main line first).

    A later line's end replaces the best so far when it meets every SLO target and the best does not, or
    when both meet them, it ranks better on the objective and `policy`, judging it against the best on the
    seeds both share, would keep it: a branch whose edge is inside the noise does not replace the main line.
    When neither meets them, it replaces the best when it misses no more targets and `policy` would keep it.
    """
    lines = sorted([*state.ends, state.snapshot()],
                   key=lambda line: -1 if line.root is None else state.walked.index(line.root)
                   if line.root in state.walked else len(state.walked))

    def passes(line: Line) -> bool:
        checks = policy_slo_checks(policy, line.baseline, initial.slo) if line.baseline else []
        return bool(line.baseline) and all(c.met for c in checks)

    def key(line: Line) -> float:
        return objective_key(initial.objective, initial.slo, line.baseline)

    def missed(line: Line) -> int:
        return sum(not c.met for c in policy_slo_checks(policy, line.baseline, initial.slo))

    best, beaten, closer = lines[0], lines[0], False
    for line in lines[1:]:
        if passes(line):
            if not passes(best) or (key(line) < key(best)
                                    and beats(line.baseline, best.baseline, initial.slo, initial.objective, policy)):
                best, beaten, closer = line, best, False
        elif not passes(best) and line.baseline and best.baseline and missed(line) <= missed(best):
            # No line meets every target: the policy judges the branch's end against the best so far as it
            # judges a round (a branch at p95 TTFT 1.5 s and +27% throughput against a main line at 8.1 s,
            # for a 1 s target, is not left behind because both miss); an end the policy leaves to noise
            # (inconclusive, not rolled back) still wins when it is closer to every missed target on every
            # shared seed.
            verdict = _verdict(policy, line, best, initial)
            if verdict is not None and verdict.keeps_candidate():
                best, beaten, closer = line, best, False
            elif verdict is Verdict.INCONCLUSIVE and closer_on_every_seed(policy, line, best, initial):
                best, beaten, closer = line, best, True
    if best.root != state.line:
        state.switch(best)
    if best.root is not None:
        state.final_note = _final_note(rounds, best, beaten, closer, len(lines), passes, policy, initial)


def _final_note(rounds: list[Round], best: Line, beaten: Line, closer: bool, walked: int,
                passes: Any, policy: Any, initial: Scenario) -> str:
    """The report's sentence for a job that ends on a branch: its path, and how it beat the line it replaced
    (the main line, or a branch that had replaced it)."""
    assert best.root is not None
    root = rounds[best.root]
    other = "the main line" if beaten.root is None else f"the branch from round {beaten.root}"
    label, value, _ = objective_figure(initial.objective, initial.slo, best.baseline)
    _, other_value, _ = objective_figure(initial.objective, initial.slo, beaten.baseline)
    if passes(best):
        rank = (f"it is the best that meets every SLO target ({label} {value:.4g}; {other} ended at "
                f"{other_value:.4g}{', beaten beyond noise' if passes(beaten) else ', missing a target'})")
    elif not closer:
        rank = (f"none meets every SLO target, and the policy keeps this one's end over the others', judged "
                f"as a round is (against {other}'s: {label} {target_figure(value, label)} against "
                f"{target_figure(other_value, label)}; "
                f"{_closest_text(policy, best, beaten, initial)})")
    else:
        shared = min(len(best.baseline), len(beaten.baseline))
        rank = (f"none meets every SLO target, and this one's end is closer to every target {other} misses on "
                f"each of the {shared} seeds both were measured on, where the policy left the other figures to "
                f"noise (against {other}'s: {_closest_text(policy, best, beaten, initial)}; "
                f"{label} {target_figure(value, label)} against {target_figure(other_value, label)})")
    return (f"The final configuration comes from the branch started at round {root.index} "
            f"(`{root.delta.summary if root.delta else root.technique}`, {why_branched(root)}): "
            f"{describe_path(rounds, best.path)}. Of the {walked} lines the search walked {rank}.")


def _verdict(policy: Any, line: Line, best: Line, initial: Scenario) -> Verdict | None:
    """`policy`'s verdict on `line`'s end judged against `best`'s on their shared seeds; None without a policy,
    or when it cannot compare them (nothing then says the line is better)."""
    if policy is None:
        return None
    shared = min(len(line.baseline), len(best.baseline))
    try:
        decision = policy.decide(best.baseline[:shared], line.baseline[:shared], initial.slo, initial.objective)
    except Exception:  # a policy that cannot compare two ends leaves the best where it is
        return None
    verdict = decision.verdict
    return verdict if isinstance(verdict, Verdict) else None


def closer_on_every_seed(policy: Any, line: Line, best: Line, initial: Scenario) -> bool:
    """Whether `line`'s end is closer than `best`'s to every SLO target `best` misses, on each seed both were
    measured on, and meets every target `best` meets (a one-sided sign test: 4 seeds of 4 leave 1 chance in
    16 to noise; fewer than 3 shared seeds decide nothing)."""
    shared = min(len(line.baseline), len(best.baseline))
    if policy is None or shared < 3:
        return False
    theirs = policy_slo_checks(policy, best.baseline, initial.slo)
    mine = {c.name: c for c in policy_slo_checks(policy, line.baseline, initial.slo)}
    missed = [c.name for c in theirs if not c.met]
    if not missed or any(c.met and not mine.get(c.name, c).met for c in theirs):
        return False
    for seed in range(shared):
        ours = {c.name: _gap(c) for c in policy_slo_checks(policy, [line.baseline[seed]], initial.slo)}
        other = {c.name: _gap(c) for c in policy_slo_checks(policy, [best.baseline[seed]], initial.slo)}
        if not all(name in ours and name in other and ours[name] < other[name] for name in missed):
            return False
    return True


def _gap(check: SLOCheck) -> float:
    """How far a figure is past its target, as a share of the target (0 when met; inf without a figure)."""
    if check.met:
        return 0.0
    if check.actual is None or check.target == 0:
        return float("inf")
    return abs(check.actual - check.target) / abs(check.target)


def _closest_text(policy: Any, best: Line, main: Line, initial: Scenario) -> str:
    """The missed targets of both ends, "ttft_p95_ms 1,501ms against 8,092ms (target 1,000ms)"."""
    mine = {c.name: c for c in policy_slo_checks(policy, best.baseline, initial.slo)}
    theirs = {c.name: c for c in policy_slo_checks(policy, main.baseline, initial.slo)}
    parts = [f"{name} {target_figure(c.actual, name)} against {target_figure(theirs[name].actual, name)} "
             f"(target {target_figure(c.target, name)})"
             for name, c in mine.items() if not c.met and name in theirs and c.actual is not None
             and theirs[name].actual is not None]
    return ", ".join(parts) or "every target it misses, the main line misses too"


def why_branched(root: Round) -> str:
    """Why `root`'s candidate was walked as a branch, for the report and the job's events."""
    if root.decision is not None and root.decision.verdict is Verdict.INCONCLUSIVE:
        return "left inconclusive on its line after the extra seeds"
    return "rolled back on its line only on an SLO target"


__all__ = ["Line", "branch_line", "choose_line", "closer_on_every_seed", "describe_path", "techniques_before", "techniques_on",
           "why_branched", "worth_a_branch"]
