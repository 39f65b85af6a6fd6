"""The runner contract: what the tuning engine relies on from every runner.

The engine awaits `run_round(scenario, seed=..., context=...)` once per repeat, stamps the seed into the
result's provenance, judges only rounds whose status is `ok`, stores every result as JSON, and reads the
runner's name and `capabilities` into the report. A runner never raises for a measurement failure: it
returns a `failed` result naming the phase at fault.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from typing import ClassVar

import msgspec
import pytest

from service.components import RoundContext, Runner, RunnerCapabilities
from service.domain import LengthDist, RoundResult, RoundStatus, Scenario, Source
from service.testing.fixtures import make_host
from service.testing.scenarios import one_worker, unstartable

# One round per (suite class, runner, scenario, seed, settings): a real runner's round takes seconds.
_ROUNDS: dict[tuple[object, ...], RoundResult] = {}


class RunnerContract:
    """Subclass and provide a `runner` fixture to run the suite.

    Override `scenario` with a deployment your runner can run in seconds (default: `one_worker()`, one
    TP1 worker on a short load), `round_context` with its cost models and settings (default: the
    built-in cost models, no settings), and `unrunnable` / `unrunnable_context` with a round it must
    refuse (default: `unstartable()`, weights that fit no GPU). Set `deterministic = True` when one seed
    always gives the same figures (a simulator), and the suite checks that the seed decides the traffic.
    """

    deterministic: ClassVar[bool] = False
    seed: ClassVar[int] = 7

    @pytest.fixture
    def scenario(self) -> Scenario:
        return one_worker()

    @pytest.fixture
    def round_context(self) -> RoundContext:
        return RoundContext(cost_models=make_host(builtins=True).components("cost_model"))

    @pytest.fixture
    def unrunnable(self) -> Scenario:
        return unstartable()

    @pytest.fixture
    def unrunnable_context(self, round_context: RoundContext) -> RoundContext:
        return round_context

    def _round(self, runner: Runner, scenario: Scenario, seed: int, context: RoundContext | None) -> RoundResult:
        key = (type(self), type(runner), runner.name, msgspec.json.encode(scenario), seed,
               repr(context.settings) if context else None, context.cost_model if context else None)
        if key not in _ROUNDS:
            result = asyncio.run(runner.run_round(scenario, seed=seed, context=context))
            assert isinstance(result, RoundResult), f"run_round returned {type(result).__name__}, not a RoundResult"
            _ROUNDS[key] = result
        return _ROUNDS[key]

    def test_declares_name_and_capabilities(self, runner: Runner) -> None:
        assert isinstance(runner, Runner)
        assert runner.name and runner.name == runner.name.strip().lower()
        capabilities = runner.capabilities
        assert isinstance(capabilities, RunnerCapabilities)
        assert all(isinstance(getattr(capabilities, f), bool) for f in capabilities.__struct_fields__)
        assert inspect.iscoroutinefunction(runner.run_round), "the engine awaits run_round"

    def test_a_round_names_the_runner_and_its_figures_are_whole(self, runner: Runner, scenario: Scenario,
                                                               round_context: RoundContext) -> None:
        result = self._round(runner, scenario, self.seed, round_context)
        assert result.status is RoundStatus.OK, f"{result.error_phase}: {result.error}"
        origin = result.provenance
        assert origin.runner == runner.name, "the report says which runner measured each figure"
        assert origin.seed in (None, self.seed), "the seed, when the runner stamps it, is the one it was given"
        simulated = origin.source is Source.SIMULATED
        assert simulated != runner.capabilities.measures_real_gpus, (
            f"source {origin.source.value} contradicts measures_real_gpus={runner.capabilities.measures_real_gpus}")
        bench = result.bench
        assert 0 < bench.completed <= scenario.bench.num_prompts
        assert bench.output_throughput > 0 and math.isfinite(bench.output_throughput)
        assert 0 < bench.median_ttft_ms <= bench.p95_ttft_ms <= bench.p99_ttft_ms
        assert 0.0 <= result.failure_rate <= 1.0
        if result.samples.ttft_ms:
            assert len(result.samples.ttft_ms) == bench.completed, "one sample per measured request"

    def test_a_round_survives_the_stores_json_and_leaves_the_scenario_alone(
            self, runner: Runner, scenario: Scenario, round_context: RoundContext) -> None:
        before = msgspec.json.encode(scenario)
        result = self._round(runner, scenario, self.seed, round_context)
        assert msgspec.json.decode(msgspec.json.encode(result), type=RoundResult) == result
        assert msgspec.json.encode(scenario) == before, "run_round must not modify the scenario"

    def test_fails_closed_on_a_deployment_it_cannot_run(self, runner: Runner, unrunnable: Scenario,
                                                        unrunnable_context: RoundContext) -> None:
        try:
            result = asyncio.run(runner.run_round(unrunnable, seed=self.seed, context=unrunnable_context))
        except Exception as exc:  # noqa: BLE001 - the contract is exactly that nothing escapes
            pytest.fail(f"run_round raised {type(exc).__name__}: {exc}; return a failed RoundResult instead")
        assert isinstance(result, RoundResult)
        assert result.status is RoundStatus.FAILED, "a round that could not run is failed, never judged"
        assert result.error and result.error_phase, "a failure names its cause and the phase at fault"
        assert result.provenance.runner == runner.name
        assert msgspec.json.decode(msgspec.json.encode(result), type=RoundResult) == result

    def test_answers_without_a_round_context(self, runner: Runner, unrunnable: Scenario) -> None:
        try:
            result = asyncio.run(runner.run_round(unrunnable, seed=self.seed))
        except Exception as exc:  # noqa: BLE001
            pytest.fail(f"run_round without a context raised {type(exc).__name__}: {exc}")
        assert isinstance(result, RoundResult) and result.status is RoundStatus.FAILED

    def test_the_seed_decides_the_traffic(self, runner: Runner, scenario: Scenario,
                                          round_context: RoundContext) -> None:
        if not self.deterministic:
            pytest.skip("set deterministic = True on a runner whose seed fixes its figures")
        # Lengths drawn from distributions, so another seed has other prompts to draw.
        workload = msgspec.structs.replace(scenario.workload, input=LengthDist(median=200, p95=800),
                                           output=LengthDist(median=32, p95=96))
        varied = msgspec.structs.replace(scenario, workload=workload)
        first = self._round(runner, varied, self.seed, round_context)
        again = asyncio.run(runner.run_round(varied, seed=self.seed, context=round_context))
        other = self._round(runner, varied, self.seed + 1, round_context)
        assert again.bench == first.bench and again.samples == first.samples, "same seed, same round"
        assert other.bench.total_input_tokens != first.bench.total_input_tokens, "another seed, other prompts"
