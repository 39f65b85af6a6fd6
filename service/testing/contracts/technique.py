"""The technique contract: what the tuning engine relies on from every technique.

The engine asks `applicable(ctx)` and, when it is, `propose(ctx)`; it applies each delta to the accepted
scenario with `apply_delta`, never measures one candidate twice (`delta_key`), skips a technique whose
`conflicts` were accepted or whose `prerequisites` were not, and sorts a casebook-ordered playbook by `rank`.
"""

from __future__ import annotations

import pytest

from service.components import Applicability, Technique, TuningContext
from service.domain import ConfigDelta
from service.engine.delta import DeltaError, apply_delta, delta_key
from service.plugin_host import PluginHost
from service.testing.fixtures import make_host
from service.testing.scenarios import CASES, casebook_context


class TechniqueContract:
    """Subclass and provide a `technique` fixture to run the suite.

    Override `context` to run it on your own scenarios (the default: each of the casebook's five starting
    points), and `host` when the technique's `conflicts` or `prerequisites` name techniques that are not
    built in (the default: a host with the built-ins and nothing else).
    """

    @pytest.fixture(params=sorted(CASES))
    def context(self, request: pytest.FixtureRequest) -> TuningContext:
        return casebook_context(request.param)

    @pytest.fixture
    def host(self) -> PluginHost:
        return make_host(builtins=True)

    def test_declares_name_and_casebook_rank(self, technique: Technique) -> None:
        assert isinstance(technique, Technique)
        assert technique.name and technique.name == technique.name.strip().lower()
        assert isinstance(technique.rank, int) and 1 <= technique.rank <= 99
        assert isinstance(technique.stepwise, bool), "stepwise says whether candidates are steps or alternatives"

    def test_applicability_states_one_checkable_sentence(self, technique: Technique, context: TuningContext) -> None:
        verdict = technique.applicable(context)
        assert isinstance(verdict, Applicability) and isinstance(verdict.applicable, bool)
        reason = verdict.reason
        assert len(reason.split()) >= 4, f"the reason must be a sentence a person can check: {reason!r}"
        assert reason.endswith(".") and not reason[0].islower(), f"one sentence, capitalised, ending in '.': {reason!r}"

    def test_proposals_are_attributed_deltas(self, technique: Technique, context: TuningContext) -> None:
        proposals = _proposals(technique, context)
        assert proposals, "an applicable technique proposes at least one candidate"
        for delta in proposals:
            assert isinstance(delta, ConfigDelta)
            assert delta.technique == technique.name, "the engine files each round under delta.technique"
            assert delta.summary, "the summary is what a person reads in the round's row"

    def test_every_proposal_applies_and_changes_the_scenario(self, technique: Technique,
                                                             context: TuningContext) -> None:
        for delta in _proposals(technique, context):
            try:
                changed = apply_delta(context.scenario, delta)
            except DeltaError as exc:
                pytest.fail(f"{delta.summary}: the engine would close this round as an error: {exc}")
            assert changed != context.scenario, f"{delta.summary} changes nothing"

    def test_alternatives_of_one_proposal_are_distinct(self, technique: Technique, context: TuningContext) -> None:
        keys = [delta_key(d) for d in _proposals(technique, context)]
        assert len(keys) == len(set(keys)), "the engine would measure the same candidate twice"

    def test_is_deterministic(self, technique: Technique, context: TuningContext) -> None:
        assert technique.applicable(context) == technique.applicable(context)
        if technique.applicable(context).applicable:
            assert technique.propose(context) == technique.propose(context)

    def test_conflicts_and_prerequisites_are_registered_names(self, technique: Technique,
                                                              host: PluginHost) -> None:
        known = set(host.components("technique")) | {technique.name}
        for name in (*technique.conflicts, *technique.prerequisites):
            assert isinstance(name, str) and name != technique.name
            assert name in known, f"{name!r} is not a registered technique (known: {', '.join(sorted(known))})"


def _proposals(technique: Technique, context: TuningContext) -> list[ConfigDelta]:
    """What the engine would be handed: it calls `propose` only when the technique applies."""
    if not technique.applicable(context).applicable:
        pytest.skip("not applicable to this context")
    proposals = technique.propose(context)
    assert isinstance(proposals, list), "propose returns a list of ConfigDelta"
    return proposals
