"""Screening on predictions: a runner that predicts exactly what it would measure (the simulator itself) reaches
the final deployment of the plain simulated run of the same casebook playbook, measuring fewer rounds; every
round it closes on a prediction says so and keeps no results; every screened round it measured says how far
its prediction was."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import ClassVar

import msgspec
import pytest

from service.components import Prediction, RoundContext, Runner, RunnerCapabilities
from service.domain import RoundResult, Scenario
from service.engine import TuningEngine, parts_from_host
from service.engine.screen import closed_by_prediction, shifted
from service.playbooks import playbook_scenario
from service.plugin_host import PluginHost


class Counted(Runner):
    """The simulated runner, counting the rounds it is asked to measure."""

    name: ClassVar[str] = "counted"
    capabilities: ClassVar[RunnerCapabilities] = RunnerCapabilities(
        restarts_servers=False, measures_real_gpus=False, needs_gpu=False)

    def __init__(self, inner: Runner) -> None:
        self.inner = inner
        self.measured = 0

    async def run_round(self, scenario: Scenario, *, seed: int | None = None,
                        context: RoundContext | None = None) -> RoundResult:
        self.measured += 1
        return await self.inner.run_round(scenario, seed=seed, context=context)


class Oracle(Counted):
    """Measures with the simulated runner and predicts with it too: a prediction with no error."""

    name: ClassVar[str] = "oracle"

    async def predict(self, scenario: Scenario, seeds: list[int],
                      context: RoundContext | None = None) -> Prediction | None:
        results = [await self.inner.run_round(scenario, seed=seed, context=context) for seed in seeds]
        return Prediction(results=results, uncertainty=0.05, basis="the simulator itself")


def _tune(playbook_name: str, oracle: bool) -> tuple[TuningEngine, int]:
    host = PluginHost()
    playbook = host.get("playbook", playbook_name)
    scenario = playbook_scenario(playbook)
    parts = parts_from_host(host, playbook, scenario, runner="simulated")
    counter = (Oracle if oracle else Counted)(parts.runner)
    parts = dataclasses.replace(parts, runner=counter)
    engine = TuningEngine(parts, playbook, scenario, seed=0, parallel=1)
    asyncio.run(engine.run())
    return engine, counter.measured


@pytest.mark.parametrize("playbook", ["coding-assistant"])
def test_screening_on_an_exact_prediction_keeps_the_final_deployment_and_measures_less(playbook: str) -> None:
    plain, plain_runs = _tune(playbook, oracle=False)
    screened, measured = _tune(playbook, oracle=True)
    assert msgspec.to_builtins(screened.state.accepted.deployment) == msgspec.to_builtins(
        plain.state.accepted.deployment)
    assert measured < plain_runs
    closed = [r for r in screened.job.rounds if r.decision is not None and r.decision.figures.get("predicted")]
    assert closed and all(not r.results and r.decision.verdict.value == "rollback" for r in closed)
    assert all(r.decision.reasons[0].startswith("predicted, not measured: ") for r in closed)
    errors = [r.decision.figures["prediction_error_output_throughput"] for r in screened.job.rounds
              if r.decision is not None and "prediction_error_output_throughput" in r.decision.figures]
    assert errors and all(abs(e) < 1e-9 for e in errors)  # the oracle predicts what it then measures


def test_the_margins_widen_each_way_and_only_outranked_keeps_close() -> None:
    from service.domain import BenchFigures, Provenance, Source

    result = RoundResult(status="ok", provenance=Provenance(source=Source.SIMULATED, runner="x"),
                         bench=BenchFigures(output_throughput=100.0, median_itl_ms=10.0, p95_ttft_ms=200.0))
    better, worse = shifted(result, 0.1, better=True), shifted(result, 0.1, better=False)
    assert better.bench.output_throughput == pytest.approx(110) and better.bench.median_itl_ms == pytest.approx(9)
    assert worse.bench.output_throughput == pytest.approx(90) and worse.bench.p95_ttft_ms == pytest.approx(220)

    @dataclasses.dataclass
    class S:
        rank: tuple[int, float, float]
        rank_optimistic: tuple[int, float, float]
        rank_pessimistic: tuple[int, float, float]
        clear_keep: bool = True
        clear_rollback: bool = False

    best = S((0, -100, 0), (0, -110, 0), (0, -90, 0))
    close = S((0, -95, 0), (0, -104, 0), (0, -85, 0))  # optimistically beats the best's pessimistic end
    far = S((0, -50, 0), (0, -55, 0), (0, -45, 0))
    loser = S((1, -200, 0), (1, -220, 0), (1, -180, 0), clear_keep=False, clear_rollback=True)
    closed = closed_by_prediction([far, best, close, loser], 1)  # type: ignore[list-item]
    assert sorted(closed) == [0, 3] and "ranks below the 1 best" in closed[0] and "rolls it back" in closed[3]
