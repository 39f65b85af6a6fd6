"""What the engine knows mid-job: the accepted deployment, its baseline figures, and what was already tried.

It is rebuilt from the journal when a job resumes (`service.engine.resume`), so everything here must follow
from the journal's rounds and the steps it recorded as skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from service.domain import Round, RoundResult, Scenario, SkippedStep
from service.engine.beam import Line
from service.engine.delta import delta_key

BASELINE_KEY = "technique:baseline"


def branch_prefix(line: int) -> str:
    """What a skip reason on the branch from round `line` starts with."""
    return f"on the branch from round {line}: "


def shown_skips(skipped: list[SkippedStep]) -> list[SkippedStep]:
    """The skipped steps a report lists: a branch's skip for the reason the main line gave is said once."""
    main = {(s.technique, s.reason) for s in skipped if s.line is None}
    return [s for s in skipped
            if s.line is None or (s.technique, s.reason.removeprefix(branch_prefix(s.line))) not in main]


@dataclass
class EngineState:
    """The accepted deployment and everything the loop needs to decide what to measure next.

    `accepted`, `baseline`, `tried`, `kept` and `path` are those of the line being walked (`line`: None for
    the main line, else its branch's root round); the other lines wait in `offers` or ended in `ends`.
    """

    accepted: Scenario
    baseline: list[RoundResult] = field(default_factory=list)
    baseline_measured: bool = False
    # Why the starting deployment could never launch (the doors' check), when it was refused before launch.
    baseline_refused: str = ""
    tried: set[str] = field(default_factory=set)
    kept: list[str] = field(default_factory=list)
    skipped: list[SkippedStep] = field(default_factory=list)
    errors_in_a_row: int = 0
    # Candidate deployments measured in this job (fingerprint -> round index): never measured twice.
    measured: dict[str, int] = field(default_factory=dict)
    # Alternatives measured before a restart whose group was not yet decided (delta key -> round).
    awaiting_decision: dict[str, Round] = field(default_factory=dict)
    # Rounds a dead worker left open (delta key -> round index): the next try points at them (`retry_of`).
    interrupted: dict[str, int] = field(default_factory=dict)
    # The deployment each measured round ran (round index -> scenario).
    scenarios: dict[int, Scenario] = field(default_factory=dict)
    # Why the final deployment is not the last accepted one (the best SLO-passing one measured instead).
    final_note: str = ""
    # For a final deployment that misses a latency target: the replicas that meet it in simulation.
    latency_capacity: list[str] = field(default_factory=list)
    # For a job that ends short of its SLO: each change the quality gate held back, simulated on the final deployment.
    gated_levers: list[str] = field(default_factory=list)
    # The line being walked: its branch's root round (None: the main line), the baseline round and the
    # rounds kept on it, the delta keys it inherited from its parent line and the techniques its parent ran.
    line: int | None = None
    path: list[int] = field(default_factory=list)
    inherited: set[str] = field(default_factory=set)
    ran: list[str] = field(default_factory=list)
    # Branches not yet walked (earliest root first), lines already walked, and the roots of every branch walked.
    offers: list[Line] = field(default_factory=list)
    ends: list[Line] = field(default_factory=list)
    walked: list[int] = field(default_factory=list)
    # Each measured round's path: the rounds whose kept deltas built the deployment it changed.
    lineage: dict[int, list[int]] = field(default_factory=dict)

    def snapshot(self) -> Line:
        """The line being walked, as it stands."""
        return Line(root=self.line, accepted=self.accepted, baseline=list(self.baseline), tried=set(self.tried),
                    kept=list(self.kept), path=list(self.path), inherited=set(self.inherited), ran=list(self.ran))

    def switch(self, line: Line) -> None:
        """Walk `line` from here on."""
        self.line, self.accepted, self.baseline = line.root, line.accepted, list(line.baseline)
        self.tried, self.kept, self.path = set(line.tried), list(line.kept), list(line.path)
        self.inherited, self.ran = set(line.inherited), list(line.ran)


def round_key(round_: Round) -> str:
    """What a round tried: its delta, or the baseline."""
    return delta_key(round_.delta) if round_.delta is not None else BASELINE_KEY


def fingerprint(scenario: Scenario) -> str:
    """Two candidates with the same fingerprint are the same deployment under the same traffic."""
    return msgspec.json.encode(msgspec.structs.replace(scenario, name="", description="")).decode()
