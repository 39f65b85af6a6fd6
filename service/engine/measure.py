"""Running a round's repeats on a runner, failing closed: an exception becomes a failed RoundResult."""

from __future__ import annotations

from service.components import RoundContext, Runner
from service.domain import Provenance, RoundResult, RoundStatus, Scenario, Source


async def measure(runner: Runner, scenario: Scenario, *, seeds: list[int],
                  context: RoundContext | None = None) -> list[RoundResult]:
    """One result per seed; stops at the first failed repeat, since the round can no longer be accepted."""
    results: list[RoundResult] = []
    for seed in seeds:
        try:
            result = await runner.run_round(scenario, seed=seed, context=context)
        except Exception as exc:  # runners should not raise for a measurement failure; if one does, fail closed
            source = Source.MEASURED if runner.capabilities.measures_real_gpus else Source.SIMULATED
            result = RoundResult(status=RoundStatus.FAILED, error=f"{type(exc).__name__}: {exc}",
                                 error_phase="runner", provenance=Provenance(source=source, runner=runner.name))
        results.append(result)
        if result.status is not RoundStatus.OK:
            break
    return results
