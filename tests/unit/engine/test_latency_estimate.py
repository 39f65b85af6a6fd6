"""The simulated replica count for a missed latency target, and what it says when it cannot give one.

The estimate simulates the final deployment with more replicas; it must never claim a count the cost model
has no basis for (one that does not reproduce the measured miss), and never cost the job its ending.
"""

from __future__ import annotations

import asyncio

import msgspec

from policies import CasebookPolicy
from service import SLO, CostModel, Provenance, RoundContext, RoundResult, RoundStatus, SLOCheck, Source
from service.engine.estimate import latency_capacity
from service.engine.setup import round_context
from service.plugin_host import PluginHost
from tests.unit.techniques.scenarios import deployment, scenario

MODEL = "Qwen/Qwen3.6-9B"
MISSED = [SLOCheck(name="ttft_p95_ms", target=2000.0, actual=9000.0, met=False)]


def _final():
    scen = scenario(MODEL, "H100-SXM", 2, deployment(MODEL, tp=1), clients=8, slo=SLO(ttft_p95_ms=2000))
    return msgspec.structs.replace(scen, bench=msgspec.structs.replace(scen.bench, num_prompts=80))


def _measured(source: Source) -> list[RoundResult]:
    return [RoundResult(status=RoundStatus.OK, provenance=Provenance(source=source, runner="local"))]


def test_a_cost_model_that_does_not_reproduce_a_measured_miss_gives_no_replica_count() -> None:
    # Eight light chat streams on one H100: the simulator puts p95 TTFT far inside 2 s, where the measured
    # rounds (on real or emulated servers) missed it at 9 s. A replica count from it would have no basis.
    final = _final()
    context = round_context(PluginHost(), final)
    [line] = asyncio.run(latency_capacity(final, _measured(Source.EMULATED), MISSED, context, CasebookPolicy(), 0))
    assert line.startswith("no simulated replica count: the ") and "does not reproduce the miss" in line
    assert "ttft_p95_ms" in line and "against 9,000ms measured" in line and "sglang-tuner calibrate" in line


class _Broken(CostModel):
    name = "broken"

    def available(self) -> bool:
        return True

    def bind(self, model, hardware, server):  # type: ignore[no-untyped-def]
        raise RuntimeError("no kernel table for this layout")


def test_a_simulation_that_raises_is_reported_and_the_estimate_returns() -> None:
    final = _final()
    context = RoundContext(cost_models={"broken": _Broken()}, cost_model="broken")
    [line] = asyncio.run(latency_capacity(final, _measured(Source.SIMULATED), MISSED, context, CasebookPolicy(), 0))
    assert line == "no simulated replica count: the simulation failed (RuntimeError: no kernel table for this layout)"


def test_no_latency_target_missed_means_no_estimate() -> None:
    final = _final()
    met = [SLOCheck(name="ttft_p95_ms", target=2000.0, actual=900.0, met=True),
           SLOCheck(name="min_output_throughput", target=9e9, actual=1e3, met=False)]
    context = round_context(PluginHost(), final)
    assert asyncio.run(latency_capacity(final, _measured(Source.SIMULATED), met, context, CasebookPolicy(), 0)) == []


def _falling(monkeypatch, p95_by_replicas: dict[int, float]) -> str:
    """The estimate's line when the simulated p95 TTFT at each replica count is `p95_by_replicas`."""
    from service import BenchFigures
    from service.engine import estimate

    def simulate(scen, seed, context):  # type: ignore[no-untyped-def]
        p95 = p95_by_replicas[scen.deployment.groups[0].replicas]
        return RoundResult(status=RoundStatus.OK, provenance=Provenance(source=Source.SIMULATED, runner="simulated",
                                                                        cost_model="roofline"),
                           bench=BenchFigures(completed=80, duration=60.0, p95_ttft_ms=p95, median_ttft_ms=p95 / 2))
    monkeypatch.setattr(estimate, "simulate_chosen", simulate)
    final = _final()
    [line] = asyncio.run(latency_capacity(final, _measured(Source.SIMULATED), MISSED, RoundContext(),
                                          CasebookPolicy(), 0))
    return line


def test_a_tail_still_falling_at_eight_times_is_load_and_the_doubling_goes_on(monkeypatch) -> None:
    line = _falling(monkeypatch, {2: 20000, 4: 9000, 8: 4000, 16: 2500, 12: 3000, 32: 1200, 24: 1800})
    assert line.startswith("simulated (roofline cost model), not measured: 24 replicas of the final deployment's "
                           "workers (24 GPUs) would meet it at the same clients (ttft_p95_ms 1,800ms against 2,000ms)")
    assert "16 replicas of the final deployment's workers (16 GPUs) would leave ttft_p95_ms 2,500ms" in line


def test_a_tail_that_stops_falling_is_not_from_load(monkeypatch) -> None:
    # 4 -> 8 replicas cut the p95 by under a fifth: what is left is one request's own time, not queueing.
    line = _falling(monkeypatch, {2: 9000, 4: 5000, 8: 4500})
    assert line.endswith("even 8 replicas of the final deployment's workers (8 GPUs) would leave ttft_p95_ms "
                         "4,500ms against 2,000ms: the tail is not from load alone, so replicas by themselves will "
                         "not meet it")


def test_a_tail_still_falling_at_thirty_two_times_names_the_levers_that_remain(monkeypatch) -> None:
    line = _falling(monkeypatch, {2: 90000, 4: 60000, 8: 30000, 16: 12000, 32: 5000})
    assert ("even 32 replicas of the final deployment's workers (32 GPUs) would leave ttft_p95_ms 5,000ms against "
            "2,000ms, and ttft_p95_ms 12,000ms with 16: the tail still falls with replicas") in line
    assert "more than that many replicas would be needed" in line
