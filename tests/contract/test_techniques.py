"""The technique contract suite, run against every registered technique on every casebook starting point."""

from __future__ import annotations

import pytest

from service import Technique, TuningContext
from service.engine import apply_delta, delta_key
from service.plugin_host import PluginHost
from service.testing import TechniqueContract
from tests.unit.engine.casebook import CASES, context

HOST = PluginHost()
TECHNIQUES = HOST.components("technique")


@pytest.fixture(params=sorted(TECHNIQUES))
def technique(request: pytest.FixtureRequest) -> Technique:
    return TECHNIQUES[request.param]


class TestEveryTechnique(TechniqueContract):
    """The shared suite, on each of the casebook's five starting points."""

    @pytest.fixture(params=sorted(CASES))
    def context(self, request: pytest.FixtureRequest) -> TuningContext:
        return context(request.param)

    def test_rank_follows_the_casebook_tuning_order(self, technique: Technique) -> None:
        assert 1 <= technique.rank <= 8

    def test_reason_is_one_sentence(self, technique: Technique, context: TuningContext) -> None:
        reason = technique.applicable(context).reason
        assert reason.endswith(".") and not reason[0].islower()

    def test_every_proposal_applies_to_a_valid_scenario(self, technique: Technique, context: TuningContext) -> None:
        if not technique.applicable(context).applicable:
            pytest.skip("not applicable to this case")
        proposals = technique.propose(context)
        assert proposals, "an applicable technique proposes at least one candidate"
        for delta in proposals:
            changed = apply_delta(context.scenario, delta)
            assert changed != context.scenario, f"{delta.summary} changes nothing"

    def test_conflicts_and_prerequisites_are_registered(self, technique: Technique) -> None:
        for name in (*technique.conflicts, *technique.prerequisites):
            assert name in TECHNIQUES

    def test_alternatives_of_one_proposal_are_distinct(self, technique: Technique, context: TuningContext) -> None:
        if not technique.applicable(context).applicable:
            pytest.skip("not applicable to this case")
        keys = [delta_key(d) for d in technique.propose(context)]
        assert len(keys) == len(set(keys)), "the engine would measure the same candidate twice"
        assert all(d.technique == technique.name for d in technique.propose(context))

    def test_declares_whether_its_candidates_are_steps_or_alternatives(self, technique: Technique) -> None:
        assert isinstance(technique.stepwise, bool)
