"""What the engine knows mid-job: the accepted deployment, its baseline figures, and what was already tried.

It is rebuilt from the journal's rounds when a job resumes (`service.engine.resume`), so everything here
must follow from the rounds alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from service.domain import Round, RoundResult, Scenario
from service.engine.delta import delta_key

BASELINE_KEY = "technique:baseline"


class SkippedStep(msgspec.Struct, frozen=True, kw_only=True):
    """A playbook step that ran no round, with the casebook rule that said so."""

    technique: str
    reason: str


@dataclass
class EngineState:
    """The accepted deployment and everything the loop needs to decide what to measure next."""

    accepted: Scenario
    baseline: list[RoundResult] = field(default_factory=list)
    baseline_measured: bool = False
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


def round_key(round_: Round) -> str:
    """What a round tried: its delta, or the baseline."""
    return delta_key(round_.delta) if round_.delta is not None else BASELINE_KEY


def fingerprint(scenario: Scenario) -> str:
    """Two candidates with the same fingerprint are the same deployment under the same traffic."""
    return msgspec.json.encode(msgspec.structs.replace(scenario, name="", description="")).decode()
