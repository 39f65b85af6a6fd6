"""The `simulated` runner: one benchmark round through the embedded SGLang simulator.

It picks the cost model from the round context: the requested name, else `aiconfigurator` when that model
is available and answers for this GPU and model, else `roofline`. When the context holds a calibration of
this model, GPU, SGLang version and cost model (its own layout first), every step carries its corrections
and the round's provenance names it.
"""

from __future__ import annotations

from typing import ClassVar

from plugins.runners.simulated_pool import portable, processes, simulate_elsewhere
from service import (
    CalibratedCostModel,
    Provenance,
    RoundContext,
    RoundResult,
    RoundStatus,
    Runner,
    RunnerCapabilities,
    Scenario,
    ServerConfig,
    Source,
    StepCostModel,
    calibration_for,
    choose_cost_model,
    resolve_model,
    simulate_round,
)


class SimulatedRunner(Runner):
    """Runs rounds in simulated time; needs no GPU and restarts nothing.

    Once an engine asks how many rounds it may run at once (`parallel_rounds`, the CPUs of this machine),
    rounds go to worker processes (`plugins.runners.simulated_pool`) so concurrent ones use every core;
    a round run on its own (`sglang-tuner round`) stays in this process.
    """

    name: ClassVar[str] = "simulated"
    capabilities: ClassVar[RunnerCapabilities] = RunnerCapabilities(
        restarts_servers=False, measures_real_gpus=False, needs_gpu=False)

    def __init__(self) -> None:
        self.processes = 1

    async def parallel_rounds(self, scenario: Scenario, context: RoundContext | None = None) -> int:
        """The worker processes rounds may use: 1 when the context holds cost models a worker lacks."""
        context = context or RoundContext()
        self.processes = processes() if portable(context.cost_models) else 1
        return self.processes

    async def run_round(self, scenario: Scenario, *, seed: int | None = None,
                        context: RoundContext | None = None) -> RoundResult:
        """Simulate the scenario's bench; failures come back as a FAILED result."""
        context = context or RoundContext()
        if self.processes > 1 and portable(context.cost_models):
            return await simulate_elsewhere(scenario, seed, context, self.processes)
        return simulate_here(scenario, seed, context)


def simulate_here(scenario: Scenario, seed: int | None, context: RoundContext) -> RoundResult:
    """One simulated round in this process."""
    try:
        model = resolve_model(scenario.model)
        name, cost_model = choose_cost_model(context, scenario, model)
    except (KeyError, ValueError) as exc:
        return _failed(str(exc), "setup", context.cost_model)

    found = calibration_for(context.calibrations, scenario, name)
    if found is not None:
        calibration, note = found
        cost_model = CalibratedCostModel(cost_model, calibration.factors, calibration.describe() + note)

    def bind(server: ServerConfig) -> StepCostModel:
        return cost_model.bind(model, scenario.hardware, server)

    result = simulate_round(scenario, model, bind, seed=seed, cost_model=name)
    if found is not None:
        result.provenance.calibration = found[0].id
    return result


def _failed(error: str, phase: str, cost_model: str | None) -> RoundResult:
    return RoundResult(status=RoundStatus.FAILED, error=error, error_phase=phase,
                       provenance=Provenance(source=Source.SIMULATED, runner="simulated", cost_model=cost_model))
