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
    RoundContext,
    RoundResult,
    Runner,
    RunnerCapabilities,
    Scenario,
    simulate_chosen,
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
    return simulate_chosen(scenario, seed, context)
