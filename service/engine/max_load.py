"""`[bench.max_load]`: the highest load at which the SLO still holds, found by a bounded search of probes.

Each probe is one benchmark on the runner at one load, with the round's seed (common random numbers, so
probes differ by load, not by traffic). The SLO holds on a probe when its status is ok and every latency
target and the failure-rate target are met on its figures; throughput, deadline and cost targets are left
to the decision, since they are what the load buys. Probes: `low`, then `high`, then bisection between the
highest load that held and the lowest that missed, at their geometric mean. The round is the highest probe that held, its figures and
goodput, with `max_load_under_slo` and one note listing every probe.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import msgspec

from service.components import RoundContext, Runner
from service.domain import (
    LATENCY_TARGETS,
    MaxLoadSearch,
    RoundResult,
    RoundStatus,
    Scenario,
    SLOCheck,
    slo_checks,
)

HELD_TARGETS = frozenset({*LATENCY_TARGETS, "failure_rate_max"})


async def run_round(runner: Runner, scenario: Scenario, *, seed: int | None,
                    context: RoundContext | None) -> RoundResult:
    """One round on `runner`: a max-load search when the bench asks for one, else a single benchmark."""
    search = scenario.bench.max_load
    if search is None:
        return await runner.run_round(scenario, seed=seed, context=context)
    return await _search(runner, scenario, search, seed=seed, context=context)


def held_checks(result: RoundResult, scenario: Scenario) -> list[SLOCheck]:
    """The SLO checks a probe must meet: latency targets and the failure rate."""
    return [c for c in slo_checks(result, scenario.slo) if c.name in HELD_TARGETS]


def _at(scenario: Scenario, search: MaxLoadSearch, load: float) -> Scenario:
    bench = scenario.bench
    if search.over == "concurrency":
        bench = msgspec.structs.replace(bench, max_concurrency=int(load), max_load=None)
    else:
        bench = msgspec.structs.replace(bench, request_rate=float(load), max_load=None)
    return msgspec.structs.replace(scenario, bench=bench)


def _load_text(search: MaxLoadSearch, load: float) -> str:
    return f"concurrency {int(load)}" if search.over == "concurrency" else f"{load:.3g} req/s"


def _next(search: MaxLoadSearch, held: float, missed: float) -> float | None:
    """The load to probe between the highest that held and the lowest that missed (their geometric mean:
    latency grows with load on a log scale, so a wide range narrows in few probes); None when close enough."""
    middle = math.sqrt(held * missed)
    if search.over == "concurrency":
        if int(missed) - int(held) <= 1:
            return None
        return float(min(max(round(middle), int(held) + 1), int(missed) - 1))
    return middle if (missed - held) / missed > search.tolerance else None


@dataclass(frozen=True)
class _Probe:
    load: float
    result: RoundResult
    missed: list[SLOCheck]

    @property
    def held(self) -> bool:
        return self.result.status is RoundStatus.OK and not self.missed


async def _search(runner: Runner, scenario: Scenario, search: MaxLoadSearch, *, seed: int | None,
                  context: RoundContext | None) -> RoundResult:
    if not any(getattr(scenario.slo, name) is not None for name in HELD_TARGETS):
        raise ValueError("bench.max_load needs an SLO latency or failure-rate target to hold; set one in [slo]")
    whole = search.over == "concurrency"
    low, high = (float(int(search.low)), float(int(search.high))) if whole else (search.low, search.high)
    probes: list[_Probe] = []

    async def probe(load: float) -> _Probe:
        result = await runner.run_round(_at(scenario, search, load), seed=seed, context=context)
        done = _Probe(load, result, [c for c in held_checks(result, scenario) if not c.met])
        probes.append(done)
        return done

    first = await probe(low)
    if not first.held:
        return _finish(first, search, probes, found=False)  # failed or missed at the lightest load
    top = await probe(high)
    if top.held:
        return _finish(top, search, probes, found=True)
    best, missed = first, high
    while len(probes) < search.probes and (load := _next(search, best.load, missed)) is not None:
        middle = await probe(load)
        if middle.held:
            best = middle
        else:
            missed = load
    return _finish(best, search, probes, found=True)


def _probe_text(search: MaxLoadSearch, probe: _Probe) -> str:
    if probe.result.status is RoundStatus.FAILED:
        return f"{_load_text(search, probe.load)} failed ({probe.result.error_phase or 'round'})"
    if probe.held:
        return f"{_load_text(search, probe.load)} held"
    return f"{_load_text(search, probe.load)} missed ({', '.join(_check_text(c) for c in probe.missed)})"


def _finish(chosen: _Probe, search: MaxLoadSearch, probes: list[_Probe], *, found: bool) -> RoundResult:
    """The chosen probe as the round: its figures, the load it held (None when none held), every probe."""
    result = chosen.result
    held = (f"the SLO held up to {_load_text(search, chosen.load)}" if found
            else f"the SLO did not hold even at {_load_text(search, chosen.load)}")
    note = f"max_load over {search.over}: {held}; probes: {'; '.join(_probe_text(search, p) for p in probes)}"
    bench = msgspec.structs.replace(result.bench, max_load_under_slo=chosen.load if found else None)
    return msgspec.structs.replace(result, bench=bench, notes=[*result.notes, note])


def _check_text(check: SLOCheck) -> str:
    actual = "not reported" if check.actual is None else f"{check.actual:.4g}"
    return f"{check.name} {actual} > {check.target:g}" if check.actual is not None else f"{check.name} {actual}"
