"""How many replicas a missed latency target would need: a simulated estimate, never a measurement.

A rate or deadline target scales with GPUs at the measured per-GPU rate (`ending.capacity_needed`). A
latency target does not scale so simply: more replicas of the final deployment shorten a tail that comes
from load (requests queued behind the running cap, prefills competing), not the time one request takes
alone. So the final deployment is simulated again with its replicas multiplied, the same clients and
traffic, and the same seed, on the cost model its rounds' context chooses (calibrated where a stored
calibration fits), until every latency target is met or eight times the replicas are not enough. Where the
eighth multiple still cut the missed figure by a fifth or more against the fourth, the tail is still load
(an arrival rate several replicas' worth beyond the final deployment's), so the doubling goes on, up to
thirty-two times; only a tail that stopped falling is reported as one replicas alone will not meet. Each
replica's share keeps as many requests as the final rounds measured (up to MAX_PROMPTS in all; a trace
replays as it is). Where the final rounds were measured, not simulated, the cost model must first
reproduce the miss on the final deployment itself.

The report labels every figure here as simulated, with the cost model; the job's own rounds say whether
the deployment's figures were measured.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import msgspec

from service.calibration import simulate_chosen
from service.components import RoundContext
from service.domain import (
    LATENCY_TARGETS,
    Deployment,
    RoundResult,
    RoundStatus,
    RouterConfig,
    Scenario,
    SLOCheck,
    Source,
)
from service.engine.slo import policy_slo_checks, target_figure

# Replica multiples tried, coarse first; a gap between a failing and a passing one is then split once.
FACTORS = (2, 4, 8)
# Further multiples, each tried only while the one before it cut the worst missed figure by STILL_FALLING.
FURTHER = (16, 32)
STILL_FALLING = 0.2
# Prompts of one estimate at most: each replica keeps the final rounds' share until this many in all.
MAX_PROMPTS = 2400


async def latency_capacity(final: Scenario, results: list[RoundResult], checks: list[SLOCheck],
                           context: RoundContext | None, policy: Any, seed: int) -> list[str]:
    """The line that says how many replicas of the final deployment meet its missed latency targets in
    simulation, or that the largest multiple tried does not ([] when no latency target is missed, or the deployment
    is not one group of identical replicas).

    Where the final rounds were not simulated, the final deployment itself is simulated first: a cost model
    that does not reproduce the measured miss gives no replica count. Never raises: a simulation that fails
    is reported as the reason there is no estimate, and the job ends as it would have.
    """
    missed = [c for c in checks if not c.met and c.name in LATENCY_TARGETS]
    deployment = final.deployment
    if not missed or context is None or deployment.is_pd or len(deployment.groups) != 1 \
            or deployment.groups[0].role != "unified":
        return []
    tried: dict[int, tuple[RoundResult, list[SLOCheck]]] = {}

    async def run(factor: int) -> bool:
        result = await asyncio.to_thread(simulate_chosen, _scaled(final, factor), seed, context)
        found = policy_slo_checks(policy, [result], final.slo) if result.status is RoundStatus.OK else []
        tried[factor] = (result, found)
        return bool(found) and all(c.met for c in found if c.name in LATENCY_TARGETS)

    try:
        if any(r.provenance.source is not Source.SIMULATED for r in results) and await run(1):
            return [_not_reproduced(missed, tried[1])]
        passing = None
        for factor in (*FACTORS, *FURTHER):
            if factor in FURTHER and not _still_falling(tried, factor // 4, factor // 2, missed):
                break
            if await run(factor):
                passing = factor
                break
            if tried[factor][0].status is not RoundStatus.OK:
                break
        if passing is not None and passing > FACTORS[0]:
            between = (passing // 2 + passing) // 2
            if between not in tried and await run(between):
                passing = between
    except Exception as exc:  # an estimate never costs the job its ending
        return [f"no simulated replica count: the simulation failed ({type(exc).__name__}: {exc})"]
    return [_line(final, missed, {f: v for f, v in tried.items() if f > 1}, passing)]


def _still_falling(tried: dict[int, tuple[RoundResult, list[SLOCheck]]], before: int, after: int,
                   missed: list[SLOCheck]) -> bool:
    """Whether doubling the replicas from `before` to `after` cut the worst missed figure (as a share of its
    target) by STILL_FALLING or more: a tail that still shrinks with replicas is load."""
    def worst(factor: int) -> float | None:
        found = {c.name: c for c in tried[factor][1]} if factor in tried else {}
        shares = [actual / c.target for c in missed if c.name in found and c.target
                  and (actual := found[c.name].actual) is not None]
        return max(shares) if shares else None
    a, b = worst(before), worst(after)
    return a is not None and b is not None and a > 0 and b <= (1 - STILL_FALLING) * a


def _not_reproduced(missed: list[SLOCheck], simulated: tuple[RoundResult, list[SLOCheck]]) -> str:
    found = {c.name: c for c in simulated[1]}
    figures = ", ".join(f"{c.name} {target_figure(found[c.name].actual, c.name)} simulated against "
                        f"{target_figure(c.actual, c.name)} measured" for c in missed if c.name in found)
    return (f"no simulated replica count: the {_source(simulated[0])} puts the final deployment itself within "
            f"its targets ({figures}), so it does not reproduce the miss; calibrate it on this job's rounds "
            "(sglang-tuner calibrate) for an estimate")


def _scaled(final: Scenario, factor: int) -> Scenario:
    """The final deployment with `factor` times its replicas behind a router, on as many nodes as they need,
    under the same clients, with `factor` times the prompts (as many per replica as the final rounds)."""
    group = final.deployment.groups[0]
    replicas = group.replicas * factor
    router = final.deployment.router or RouterConfig(port=group.base_port)
    base_port = group.base_port if final.deployment.router else group.base_port + 1
    worker = msgspec.structs.replace(group, replicas=replicas, base_port=base_port)
    per_replica = max(1, final.deployment.total_gpus() // max(group.replicas, 1))
    nodes = math.ceil(replicas * per_replica / final.hardware.gpus_per_node)
    bench = final.bench
    if bench.trace is None:  # a trace's requests are its own: more of them would be later, other traffic
        bench = msgspec.structs.replace(bench, num_prompts=min(bench.num_prompts * factor,
                                                               max(bench.num_prompts, MAX_PROMPTS)),
                                        warmup_requests=bench.warmup_requests * factor)
    return msgspec.structs.replace(final, deployment=Deployment(groups=[worker], router=router),
                                   hardware=msgspec.structs.replace(final.hardware, nodes=max(nodes, 1)),
                                   bench=bench)


def _line(final: Scenario, missed: list[SLOCheck], tried: dict[int, tuple[RoundResult, list[SLOCheck]]],
          passing: int | None) -> str:
    group = final.deployment.groups[0]
    per_replica = max(1, final.deployment.total_gpus() // max(group.replicas, 1))
    widest = max(tried)
    source = _source(tried[passing if passing is not None else widest][0])

    def at(factor: int, against: bool = False) -> str:
        found = {c.name: c for c in tried[factor][1]}
        return ", ".join(f"{c.name} {target_figure(found[c.name].actual, c.name)}"
                         + (f" against {target_figure(c.target, c.name)}" if against else "")
                         for c in missed if c.name in found)

    def size(factor: int) -> str:
        gpus = group.replicas * factor * per_replica
        return f"{group.replicas * factor} replicas of the final deployment's workers ({gpus} GPUs)"

    if passing is not None:
        short = [f for f in tried if f < passing and tried[f][1]]
        below = f"; {size(max(short))} would leave {at(max(short))}" if short else ""
        return (f"simulated ({source}), not measured: {size(passing)} would meet it at the same clients "
                f"({at(passing, against=True)}){below}")
    targets = ", ".join(f"{c.name} {target_figure(c.target, c.name)}" for c in missed)
    if tried[widest][0].status is not RoundStatus.OK:
        return (f"simulated ({source}), not measured: no replica count was estimated for {targets}: the "
                f"simulation of {size(widest)} did not complete ({tried[widest][0].error})")
    even = f"simulated ({source}), not measured: even {size(widest)} would leave {at(widest, against=True)}"
    if widest >= FURTHER[-1] and _still_falling(tried, widest // 2, widest, missed):
        return (f"{even}, and {at(widest // 2)} with {group.replicas * widest // 2}: the tail still falls with "
                "replicas, so it is load, but more than that many replicas would be needed; fewer, faster "
                "replicas (FP8, speculative decoding) or less traffic per deployment are the levers")
    return f"{even}: the tail is not from load alone, so replicas by themselves will not meet it"



def _source(result: RoundResult) -> str:
    provenance = result.provenance
    calibrated = ", calibrated" if provenance.calibration else ""
    return f"{provenance.cost_model or 'unknown'} cost model{calibrated}"


__all__ = ["FACTORS", "FURTHER", "MAX_PROMPTS", "latency_capacity"]
