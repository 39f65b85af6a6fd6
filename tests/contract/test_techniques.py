"""The shipped technique contract, run against every built-in technique on every casebook starting point."""

from __future__ import annotations

from pathlib import Path

import pytest

from service import Technique
from service.scenario import load_scenario
from service.testing import TechniqueContract, casebook_scenario, make_host

EXAMPLE = Path(__file__).parents[2] / "examples" / "casebook" / "coding-assistant-final.toml"
TECHNIQUES = make_host(builtins=True).components("technique")


@pytest.fixture(params=sorted(TECHNIQUES))
def technique(request: pytest.FixtureRequest) -> Technique:
    return TECHNIQUES[request.param]


class TestEveryTechnique(TechniqueContract):
    """The suite's default contexts are the casebook's five starting points."""


def test_rank_follows_the_casebook_tuning_order(technique: Technique) -> None:
    assert 1 <= technique.rank <= 8


def test_the_suites_final_scenario_is_the_casebook_example_file() -> None:
    # The suites build their scenarios in code (a wheel has no examples/); this keeps the two in step.
    assert casebook_scenario() == load_scenario(EXAMPLE)
