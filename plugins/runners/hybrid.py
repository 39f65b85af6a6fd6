"""The `hybrid` runner: measure for real only what a calibrated simulation cannot rule out.

Every round it is asked to run it measures with a real runner (`hybrid_measure`: `local`, `attach` or `ray`),
then fits the simulator's corrections (`service.calibration`) on every round it measured in the job. Asked to
predict (`Runner.predict`), it simulates the candidate on the job's seeds with that calibration. The engine
screens a step's candidates on those predictions (`service.engine.screen`): what the policy rolls back even
if the prediction errs in the candidate's favour is closed as predicted and never measured; the rest is
measured and decided on measured figures, and each measured round's decision says how far its prediction
was. Before its first measurement (the baseline) it predicts nothing, so everything is measured. A resumed
job's runner is handed the rounds its journal kept (`RoundContext.measured`) and fits on them first.

The uncertainty a prediction carries is the larger of the calibration's RMS error on the rounds it was
fitted on and MIN_UNCERTAINTY; UNSEEN_LAYOUT_FACTOR times that for a candidate whose replicas are laid out as
none of the measured rounds' (another TP, DP or EP size, or a PD split): the fit extrapolates there. The
engine widens it by how far the job's earlier predictions were from the measurements that followed
(`service.engine.screen.widened`).
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

import msgspec

from service import (
    CalibratedCostModel,
    Calibration,
    MeasuredHere,
    Observation,
    Prediction,
    Provenance,
    RoundContext,
    RoundResult,
    RoundStatus,
    Runner,
    RunnerCapabilities,
    Scenario,
    Source,
    cost_model_for,
    fit_calibration,
    get_logger,
    layout_of,
    load_runner_settings,
    simulate_with,
)

log = get_logger(__name__)

MIN_UNCERTAINTY = 0.05
# A refit weighs the newest rounds measured in the job (each repeat is one round), at most this many.
FIT_ROUNDS = 6
REFIT_EVALUATIONS = 16
SIMULATIONS_KEPT = 256
# A fit on TP8 alone predicted TP2 x 4's throughput 16% high with 7.4% in-sample error (BENCHMARKS.md, "Real
# rounds of the hybrid runner"): the cost-model gap it absorbs differs by layout.
UNSEEN_LAYOUT_FACTOR = 2.0
MAX_UNCERTAINTY = 0.9  # a shifted latency stays positive


class HybridRunner(Runner):
    """Measures with the runner named by `hybrid_measure`; predicts with a simulator calibrated on what it
    measured in the job."""

    name: ClassVar[str] = "hybrid"
    capabilities: ClassVar[RunnerCapabilities] = RunnerCapabilities(
        restarts_servers=True, measures_real_gpus=True, needs_gpu=True)

    def __init__(self, measurers: dict[str, Runner]) -> None:
        self.measurers = measurers
        # Simulations by (calibration id, scenario, seed): the engine's screening predicts a candidate, then
        # asks to measure it, and the measurement's prediction error needs the same simulation again.
        self._simulated: dict[tuple[str, bytes, int | None], RoundResult] = {}

    def _measurer(self, context: RoundContext) -> Runner:
        chosen = load_runner_settings(context.settings).hybrid_measure
        return self.measurers[chosen]

    async def parallel_rounds(self, scenario: Scenario, context: RoundContext | None = None) -> int:
        # One round at a time: each measurement recalibrates what the next prediction rests on.
        return 1

    async def run_round(self, scenario: Scenario, *, seed: int | None = None,
                        context: RoundContext | None = None) -> RoundResult:
        """Measure for real, then recalibrate on every round measured in this job."""
        context = context or RoundContext()
        here = context.measured
        measurer = self._measurer(context)
        result = await measurer.run_round(scenario, seed=seed, context=context)
        result.provenance.runner = self.name
        # The seed the round's requests were drawn with: the fit replays the same requests in simulation.
        result.provenance.seed = seed if result.provenance.seed is None else result.provenance.seed
        result.provenance.note = "; ".join(filter(None, [f"measured by the `{measurer.name}` runner",
                                                         result.provenance.note]))
        if result.status is not RoundStatus.OK or result.bench.completed == 0:
            return result
        here.rounds.append((scenario, result))
        await self._refit(here, context)
        return result

    async def _refit(self, here: MeasuredHere, context: RoundContext) -> None:
        try:
            here.calibration = await asyncio.to_thread(self._fit, here.rounds[-FIT_ROUNDS:], context,
                                                       here.calibration)
        except (ValueError, KeyError) as exc:  # an unfittable round leaves the last calibration standing
            log.warning("hybrid_calibration_failed", error=str(exc))

    async def predict(self, scenario: Scenario, seeds: list[int],
                      context: RoundContext | None = None) -> Prediction | None:
        """The candidate on each seed, simulated with the job's calibration; None before the first measurement."""
        context = context or RoundContext()
        here = context.measured
        if here.calibration is None and here.rounds:  # a resumed job: its journal's rounds, not yet fitted
            await self._refit(here, context)
        calibration = here.calibration
        if calibration is None:
            return None
        results = [await self._simulate(scenario, seed, context, calibration) for seed in seeds]
        uncertainty = max(MIN_UNCERTAINTY, calibration.rms_error)
        plural = "round" if len(here.rounds) == 1 else "rounds"
        basis = f"calibrated on {len(here.rounds)} measured {plural} of this job [{calibration.id}]"
        if replica_layout(scenario) not in {replica_layout(s) for s, _ in here.rounds}:
            uncertainty = min(uncertainty * UNSEEN_LAYOUT_FACTOR, MAX_UNCERTAINTY)
            basis += f"; its replicas' layout ({replica_layout(scenario)}) was not measured, uncertainty doubled"
        return Prediction(results=results, uncertainty=uncertainty, basis=basis,
                          measure_top_k=load_runner_settings(context.settings).hybrid_top_k)

    def _fit(self, rounds: list[tuple[Scenario, RoundResult]], context: RoundContext,
             previous: Calibration | None) -> Calibration:
        name, base = cost_model_for(context.cost_models, context.cost_model, rounds[0][0])
        observations = [Observation(s, r, r.provenance.seed, f"{r.provenance.runner} round") for s, r in rounds]
        if previous is None:
            return fit_calibration(observations, base, name)
        return fit_calibration(observations, base, name, start=previous.factors,
                               max_evaluations=REFIT_EVALUATIONS)

    async def _simulate(self, scenario: Scenario, seed: int | None, context: RoundContext,
                        calibration: Calibration) -> RoundResult:
        key = (calibration.id, msgspec.msgpack.encode(scenario), seed)
        if key not in self._simulated:
            if len(self._simulated) >= SIMULATIONS_KEPT:
                self._simulated.pop(next(iter(self._simulated)))
            self._simulated[key] = await self._simulate_now(scenario, seed, context, calibration)
        # A copy: the engine stamps what it is handed.
        return msgspec.msgpack.decode(msgspec.msgpack.encode(self._simulated[key]), type=RoundResult)

    async def _simulate_now(self, scenario: Scenario, seed: int | None, context: RoundContext,
                            calibration: Calibration) -> RoundResult:
        def run() -> RoundResult:
            name, base = cost_model_for(context.cost_models, context.cost_model, scenario)
            result = simulate_with(scenario, CalibratedCostModel.of(base, calibration), name, seed)
            result.provenance.runner = self.name
            result.provenance.calibration = calibration.id
            result.provenance.note = "predicted by a simulation calibrated on this job's measured rounds"
            return result
        try:
            return await asyncio.to_thread(run)
        except (ValueError, KeyError) as exc:
            return RoundResult(status=RoundStatus.FAILED, error=str(exc), error_phase="setup",
                               provenance=Provenance(source=Source.SIMULATED, runner=self.name))


def replica_layout(scenario: Scenario) -> str:
    """How one replica of each group is laid out (`tp2`, `tp2 prefill + tp2 decode`): the replica counts aside,
    which the simulator's router splits the load over."""
    groups = [msgspec.structs.replace(group, replicas=1) for group in scenario.deployment.groups]
    return layout_of(msgspec.structs.replace(scenario.deployment, groups=groups)).replace("1x ", "")
