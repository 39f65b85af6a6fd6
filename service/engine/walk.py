"""Where a resumed line picks up its walk, from the rounds it already has (the same live and after a restart)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from service.domain import Round


def resumed_steps(all_rounds: Sequence[Round], line: int | None, path: Sequence[int], steps: list[str],
                  reopens: Mapping[str, Sequence[str]]) -> list[str]:
    """The steps `line` still runs: the technique of its last round first (it may have candidates left), then
    the steps a change kept on the line (`path`) reopened and that have not run since, then the steps without a
    round on it. A line with no rounds runs `steps` as they are. `reopens`: technique -> the steps it reopens
    (empty when the playbook's order is its author's)."""
    rounds = [r for r in all_rounds if r.line == line and r.delta is not None]
    if not rounds:
        return steps
    last = rounds[-1].technique
    owed = [s for s in owed_reopens(rounds, path, reopens) if s != last]
    ran = {r.technique for r in rounds}
    return [last, *owed, *(s for s in steps if s not in ran and s not in owed and s != last)]


def owed_reopens(rounds: Sequence[Round], path: Sequence[int], reopens: Mapping[str, Sequence[str]]) -> list[str]:
    """Steps a change kept among `rounds` (one line's, in order) reopened, that measured a round before it and
    have none after it."""
    owed: list[str] = []
    for i, kept in enumerate(rounds):
        if kept.index not in path:
            continue
        for step in reopens.get(kept.technique, ()):
            before = any(r.technique == step and r.results for r in rounds[:i])
            since = any(r.technique == step for r in rounds[i + 1:])
            if before and not since and step in reopens and step not in owed:
                owed.append(step)
    return owed
