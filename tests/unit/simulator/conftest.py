"""Helpers for simulator tests: casebook round-0 scenarios and the analytic cost model."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from service.domain import RoundResult, Scenario, resolve_model
from service.simulator import simulate_round
from service.simulator.analytic import analytic_binder

ROOT = Path(__file__).resolve().parents[3]
# The round-0 scenarios ship with the built-in playbooks; the final configurations stay examples.
FOLDERS = (ROOT / "playbooks" / "scenarios", ROOT / "examples" / "casebook")


def load(name: str) -> Scenario:
    path = next(folder / f"{name}.toml" for folder in FOLDERS if (folder / f"{name}.toml").is_file())
    return msgspec.toml.decode(path.read_bytes(), type=Scenario)


def run(scenario: Scenario, seed: int = 7) -> RoundResult:
    model = resolve_model(scenario.model)
    return simulate_round(scenario, model, analytic_binder(model, scenario.hardware), seed=seed,
                          cost_model="analytic")


@pytest.fixture
def casebook() -> object:
    return load
