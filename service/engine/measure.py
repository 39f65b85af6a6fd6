"""Running a round's repeats on a runner, failing closed: an exception becomes a failed RoundResult."""

from __future__ import annotations

from statistics import fmean
from typing import TypeVar

import msgspec

from service.components import RoundContext, Runner
from service.domain import BenchFigures, Provenance, RoundResult, RoundStatus, Scenario, ServerMetrics, Source

_Figures = TypeVar("_Figures", BenchFigures, ServerMetrics)


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
        return await runner.run_round(scenario, seed=seed, context=context)
    except Exception as exc:  # runners should not raise for a measurement failure; if one does, fail closed
        source = Source.MEASURED if runner.capabilities.measures_real_gpus else Source.SIMULATED
        return RoundResult(status=RoundStatus.FAILED, error=f"{type(exc).__name__}: {exc}", error_phase="runner",
                           provenance=Provenance(source=source, runner=runner.name))


def mean_result(results: list[RoundResult]) -> RoundResult:
    """One result whose bench and server figures are the means over the repeats (what reports quote).

    The first repeat's status, provenance and per-request samples are kept; a figure a repeat did not
    report (None) is left out of its mean.
    """
    first = results[0]
    if len(results) == 1:
        return first
    bench = _mean_struct(first.bench, [r.bench for r in results])
    server = _mean_struct(first.server, [r.server for r in results])
    costs = [r.cost_per_1m_output_tokens for r in results if r.cost_per_1m_output_tokens is not None]
    imbalance = [r.expert_imbalance for r in results if r.expert_imbalance is not None]
    return msgspec.structs.replace(
        first, bench=bench, server=server, failure_rate=fmean(r.failure_rate for r in results),
        cost_per_1m_output_tokens=fmean(costs) if costs else None,
        expert_imbalance=fmean(imbalance) if imbalance else None)


def _mean_struct(first: _Figures, items: list[_Figures]) -> _Figures:
    changes: dict[str, object] = {}
    for name in first.__struct_fields__:
        values = [getattr(item, name) for item in items]
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if not numbers or len(numbers) != len([v for v in values if v is not None]):
            continue
        mean = fmean(numbers)
        changes[name] = round(mean) if isinstance(getattr(first, name), int) else mean
    return msgspec.structs.replace(first, **changes)
