"""Decision quality of the casebook policy on the simulator, with a different seed for every repeat.

Small rounds keep this quick; every repeat of every side draws its own traffic (no seed is shared
between the baseline and the candidate), so the noise the policy sees is real sampling noise. An A/A
pair on the same seed would be trivial here: the simulator is deterministic, so both sides are identical.
- A/A: the candidate is the baseline itself; at most 1 of 50 may be accepted as an improvement, both
  when the policy compares the sides as two groups and when the rounds claim the same seeds (the paired
  analysis on pairs that share nothing, as on GPUs whose timings never repeat exactly).
- Injected regression: capping max-running-requests at 20 under 32 clients loses about 18% of the
  output throughput (asserted to be 15% or more); at least 19 of 20 such candidates are not kept, from
  independent traffic and from the same traffic as the baseline (the engine's paired rounds).
- A candidate round whose measurement failed or is partial is never accepted, however good its figures.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from statistics import fmean

import msgspec
import pytest

from service import SLO, ConfigDelta, Objective, Playbook, RoundContext, RoundResult, RoundStatus, Scenario, Verdict
from service.engine import EngineParts, TuningEngine, apply_delta, parts_from_host
from service.plugin_host import PluginHost
from service.scenario import load_scenario
from tests.unit.engine.fakes import SweepTechnique

HOST = PluginHost()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif("simulated" not in HOST.components("runner") or "casebook" not in HOST.components("policy"),
                       reason="needs the simulated runner and the casebook policy"),
]
EXAMPLE = Path(__file__).resolve().parents[2] / "playbooks" / "scenarios" / "nightly-batch-round0.toml"
REPEATS = 3
A_A_TRIALS = 50
REGRESSION_TRIALS = 20
CAP = {"max_running_requests": 20}


def small_scenario() -> Scenario:
    """Casebook case 3's hardware and traffic (9B, no speculation) at 32 clients, 80 prompts per repeat."""
    scenario = load_scenario(EXAMPLE)
    server = scenario.deployment.groups[0].server
    server = msgspec.structs.replace(server, model_path="Qwen/Qwen3.6-9B", speculative_algorithm=None,
                                     speculative_draft_model_path=None, speculative_num_steps=None,
                                     speculative_eagle_topk=None, speculative_num_draft_tokens=None)
    groups = [msgspec.structs.replace(scenario.deployment.groups[0], server=server)]
    bench = msgspec.structs.replace(scenario.bench, num_prompts=80, max_concurrency=32, warmup_requests=4)
    # No SLO and a throughput objective: nothing but the measured change can hold a candidate back, so a
    # noise-driven "improvement" would be kept (the strictest setting for the A/A test).
    return msgspec.structs.replace(scenario, model="Qwen/Qwen3.6-9B", bench=bench, slo=SLO(),
                                   objective=Objective(kind="throughput"),
                                   deployment=msgspec.structs.replace(scenario.deployment, groups=groups))


SCENARIO = small_scenario()
PARTS = parts_from_host(HOST, Playbook(name="decision-quality"), SCENARIO, cost_model="roofline")
CONTEXT: RoundContext = PARTS.round_context  # type: ignore[assignment]


def measure(scenario: Scenario, first_seed: int, *, claimed_seed: int | None = None) -> list[RoundResult]:
    """REPEATS repeats on seeds first_seed, first_seed + 1, ...; `claimed_seed` stamps other seed numbers on
    them, so two rounds of unrelated traffic look paired to the policy."""
    async def repeats() -> list[RoundResult]:
        return [await PARTS.runner.run_round(scenario, seed=first_seed + i, context=CONTEXT) for i in range(REPEATS)]

    results = asyncio.run(repeats())
    assert all(r.status is RoundStatus.OK for r in results)
    if claimed_seed is not None:
        results = [msgspec.structs.replace(r, provenance=msgspec.structs.replace(r.provenance, seed=claimed_seed + i))
                   for i, r in enumerate(results)]
    return results


def decide(baseline: list[RoundResult], candidate: list[RoundResult]) -> Verdict:
    return PARTS.policy.decide(baseline, candidate, SCENARIO.slo, SCENARIO.objective).verdict


def capped(cap: dict[str, int] = CAP) -> Scenario:
    return apply_delta(SCENARIO, ConfigDelta(technique="batch_parameters", summary="cap", set_server=cap))


def test_a_a_rounds_are_almost_never_accepted() -> None:
    accepted = []
    for trial in range(A_A_TRIALS):
        seed = 10_000 + 2 * REPEATS * trial  # baseline and candidate each draw their own seeds
        verdict = decide(measure(SCENARIO, seed), measure(SCENARIO, seed + REPEATS))
        if verdict.keeps_candidate():
            accepted.append((trial, verdict))
    assert len(accepted) <= 1, f"A/A rounds kept as improvements: {accepted}"


def test_a_a_rounds_compared_pair_by_pair_are_almost_never_accepted() -> None:
    accepted = []
    for trial in range(A_A_TRIALS):
        seed = 20_000 + 2 * REPEATS * trial
        baseline = measure(SCENARIO, seed, claimed_seed=seed)
        candidate = measure(SCENARIO, seed + REPEATS, claimed_seed=seed)  # unrelated traffic, same seed numbers
        verdict = decide(baseline, candidate)
        if verdict.keeps_candidate():
            accepted.append((trial, verdict))
    assert len(accepted) <= 1, f"A/A rounds kept as improvements: {accepted}"


def test_injected_regressions_on_the_baselines_traffic_are_rolled_back() -> None:
    regressed = capped()
    kept = []
    for trial in range(REGRESSION_TRIALS):
        seed = 60_000 + REPEATS * trial
        baseline = measure(SCENARIO, seed, claimed_seed=seed)
        candidate = measure(regressed, seed, claimed_seed=seed)  # the engine's paired rounds: the same prompts
        verdict = decide(baseline, candidate)
        if verdict.keeps_candidate():
            kept.append((trial, verdict))
    assert len(kept) <= REGRESSION_TRIALS - 19, f"regressions kept: {kept}"


def test_injected_regressions_are_rolled_back() -> None:
    regressed = capped()
    kept, drops = [], []
    for trial in range(REGRESSION_TRIALS):
        seed = 50_000 + 2 * REPEATS * trial
        baseline, candidate = measure(SCENARIO, seed), measure(regressed, seed + REPEATS)
        drops.append(1 - fmean(r.bench.output_throughput for r in candidate)
                     / fmean(r.bench.output_throughput for r in baseline))
        verdict = decide(baseline, candidate)
        if verdict.keeps_candidate():
            kept.append((trial, verdict))
    assert fmean(drops) >= 0.15, f"the injected regression is too small to test with: {fmean(drops):.1%}"
    assert len(kept) <= REGRESSION_TRIALS - 19, f"regressions kept: {kept}"


@pytest.mark.parametrize("status", [RoundStatus.FAILED, RoundStatus.PARTIAL])
def test_a_failed_measurement_is_never_accepted_by_the_policy(status: RoundStatus) -> None:
    baseline = measure(capped({"max_running_requests": 8}), 70_000)
    better = measure(SCENARIO, 70_000 + REPEATS)  # clearly better figures, but one repeat did not complete
    assert decide(baseline, better).keeps_candidate()
    broken = [*better[:-1], msgspec.structs.replace(better[-1], status=status, error="3 of 80 requests failed")]
    assert decide(baseline, broken) is Verdict.ERROR


def test_a_failed_measurement_is_never_accepted_by_the_engine() -> None:
    class PartialCandidates:
        """The simulated runner, except that every candidate round comes back partial."""

        name = "partial"
        capabilities = PARTS.runner.capabilities

        def __init__(self) -> None:
            self.calls = 0

        async def run_round(self, scenario: Scenario, *, seed: int | None = None,
                            context: RoundContext | None = None) -> RoundResult:
            self.calls += 1
            result = await PARTS.runner.run_round(scenario, seed=seed, context=context)
            if self.calls <= REPEATS:
                return result
            return msgspec.structs.replace(result, status=RoundStatus.PARTIAL, error="connection reset")

    parts = EngineParts(techniques={"sweep": SweepTechnique([2048, 1024])}, runner=PartialCandidates(),  # type: ignore[arg-type]
                        policy=PARTS.policy, round_context=CONTEXT)
    outcome = asyncio.run(TuningEngine(parts, Playbook(name="p", techniques=["sweep"], repeats=REPEATS),
                                       SCENARIO).run())
    candidates = outcome.job.rounds[1:]
    assert candidates and all(r.decision is not None and r.decision.verdict is Verdict.ERROR for r in candidates)
    assert outcome.final == outcome.initial
