"""Running a round's repeats on a runner, failing closed: an exception becomes a failed RoundResult."""

from __future__ import annotations

import msgspec

from service.components import RoundContext, Runner
from service.domain import Provenance, RoundResult, RoundStatus, Scenario, Source, mean_result
from service.engine.max_load import run_round

__all__ = ["mean_result", "measure"]


async def measure(runner: Runner, scenario: Scenario, *, seeds: list[int],
                  context: RoundContext | None = None) -> list[RoundResult]:
    """One result per seed, one repeat after another; stops at the first failed repeat.

    Repeats run in order (never concurrently) because a runner on real GPUs holds the deployment for the
    whole round, and a failed repeat already means the round can no longer be accepted.
    """
    results: list[RoundResult] = []
    for seed in seeds:
        result = await _repeat(runner, scenario, seed, context)
        results.append(result)
        if result.status is not RoundStatus.OK:
            break
    return results


async def _repeat(runner: Runner, scenario: Scenario, seed: int, context: RoundContext | None) -> RoundResult:
    try:
        result = await run_round(runner, scenario, seed=seed, context=context)
    except Exception as exc:  # runners should not raise for a measurement failure; if one does, fail closed
        source = Source.MEASURED if runner.capabilities.measures_real_gpus else Source.SIMULATED
        return RoundResult(status=RoundStatus.FAILED, error=f"{type(exc).__name__}: {exc}", error_phase="runner",
                           provenance=Provenance(source=source, runner=runner.name, seed=seed))
    # The seed tells the policy which repeats of two rounds saw the same traffic (a paired comparison).
    return msgspec.structs.replace(result, provenance=msgspec.structs.replace(result.provenance, seed=seed))
