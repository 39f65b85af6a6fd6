"""Contract suites every component of a kind must pass; built-ins and third-party plugins alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.components import Applicability, Technique, TuningContext
from service.domain import ConfigDelta, resolve_model
from service.scenario import load_scenario

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "casebook"


def casebook_context(name: str = "coding-assistant-final") -> TuningContext:
    """A tuning context built from one of the shipped casebook scenarios."""
    scenario = load_scenario(EXAMPLES / f"{name}.toml")
    return TuningContext(scenario=scenario, model=resolve_model(scenario.model))


class TechniqueContract:
    """Subclass and provide a `technique` fixture (and optionally `context`) to run the suite."""

    @pytest.fixture
    def context(self) -> TuningContext:
        return casebook_context()

    def test_declares_name_and_casebook_rank(self, technique: Technique) -> None:
        assert isinstance(technique, Technique)
        assert technique.name and technique.name == technique.name.strip().lower()
        assert isinstance(technique.rank, int) and 1 <= technique.rank <= 99

    def test_applicability_states_a_reason(self, technique: Technique, context: TuningContext) -> None:
        verdict = technique.applicable(context)
        assert isinstance(verdict, Applicability)
        assert len(verdict.reason.split()) >= 4, "the reason must be a sentence a person can check"

    def test_proposals_are_attributed_deltas(self, technique: Technique, context: TuningContext) -> None:
        if not technique.applicable(context).applicable:
            pytest.skip("not applicable to this context")
        proposals = technique.propose(context)
        assert isinstance(proposals, list)
        for delta in proposals:
            assert isinstance(delta, ConfigDelta)
            assert delta.technique == technique.name
            assert delta.summary

    def test_is_deterministic(self, technique: Technique, context: TuningContext) -> None:
        assert technique.applicable(context) == technique.applicable(context)
        if technique.applicable(context).applicable:
            assert technique.propose(context) == technique.propose(context)

    def test_conflicts_and_prerequisites_are_names(self, technique: Technique) -> None:
        for name in (*technique.conflicts, *technique.prerequisites):
            assert isinstance(name, str) and name != technique.name
