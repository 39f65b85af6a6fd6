"""The `run` fixture of the casebook direction tests: one round on the default chain, memoised."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from service.components import RoundContext
from service.domain import RoundResult, Scenario
from service.plugin_host import PluginHost


@pytest.fixture(scope="session")
def run():  # type: ignore[no-untyped-def]
    """Run a round on the default chain; engines compile once per process and are reused."""
    host = PluginHost()
    runner = host.get("runner", "simulated")
    context = RoundContext(cost_models=host.components("cost_model"))

    done: dict[tuple[bytes, int], RoundResult] = {}

    def _run(scenario: Scenario, seed: int = 11) -> RoundResult:
        key = (msgspec.json.encode(scenario), seed)  # a round is deterministic for its scenario and seed
        if key not in done:
            done[key] = asyncio.run(runner.run_round(scenario, seed=seed, context=context))
        result = done[key]
        assert result.provenance.cost_model == "aiconfigurator"
        return result

    return _run
