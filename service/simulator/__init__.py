"""A discrete-event model of SGLang serving: one benchmark round of a scenario, without GPUs.

`simulate_round` is the entry point the `simulated` runner uses; step times come from a bound
`StepCostModel` per server, everything else (queues, prefix cache, routing, speculation, grammar,
expert balance, PD transfer) is simulated here.
"""

from __future__ import annotations

import math

import msgspec
import numpy as np

from service.domain import ModelSpec, Provenance, RoundResult, RoundStatus, Scenario, Source
from service.simulator.cluster import BindCost, build_cluster
from service.simulator.engine import EventLoop
from service.simulator.memory import ServerStartError, resolve_server
from service.simulator.metrics import round_result
from service.simulator.requests import CONTEXT_MARGIN, SimRequest, build_requests


def simulate_round(scenario: Scenario, model: ModelSpec, bind: BindCost, *, seed: int | None = None,
                   cost_model: str = "unknown") -> RoundResult:
    """Simulate `scenario.bench` against `scenario.deployment`; `bind(server)` gives each server's step costs.

    Deterministic for a given seed (default: the bench seed). Startup failures (weights that do not fit)
    come back as a FAILED result, never as an exception.
    """
    rng = np.random.default_rng(scenario.bench.seed if seed is None else seed)
    holder: list[EventLoop] = []

    def on_finish(r: SimRequest, now: float) -> None:
        holder[0].finished(r, now)

    try:
        cluster = build_cluster(scenario, model, bind, rng, on_finish)
    except ServerStartError as exc:
        return RoundResult(status=RoundStatus.FAILED, error=str(exc), error_phase="start", config_fault=True,
                           provenance=Provenance(source=Source.SIMULATED, runner="simulated", cost_model=cost_model,
                                                 sglang_version=scenario.sglang_version))
    bench = scenario.bench
    scale = cluster.scale
    concurrency = math.ceil(bench.max_concurrency / scale) if bench.max_concurrency else None
    trace = bench.trace
    # A trace replays at its own times (bench_serving ignores --request-rate for it); a representative replica
    # takes every scale-th of its records.
    rate = bench.request_rate / scale if bench.request_rate and trace is None else None
    prompts = bench.num_prompts if trace is not None else math.ceil(bench.num_prompts / scale)
    scaled = msgspec.structs.replace(bench, num_prompts=prompts,
                                     warmup_requests=math.ceil(bench.warmup_requests / scale))
    warm, measured = build_requests(scenario.workload, scaled, model, rng, stride=scale if trace is not None else 1)
    if trace is None and (cut := sum(1 for r in measured if r.input_len >= model.max_context - CONTEXT_MARGIN)):
        # The workload's lengths are drawn up to the window; SGLang refuses a longer prompt, which a real round's
        # failure rate counts and this one does not.
        cluster.notes.append(f"{cut} of {len(measured)} prompts were drawn past {model.name}'s context window of "
                             f"{model.max_context:,} tokens and cut to it; SGLang refuses such requests")
    loop = EventLoop(cluster, bench, scenario.hardware, rng, concurrency, rate,
                     variable_period_s=scenario.workload.prefix.variable_period_s,
                     timed=trace is not None and trace.timestamps)
    holder.append(loop)
    outcome = loop.run(warm, measured)
    return round_result(scenario, outcome, cluster, cost_model, rng)


__all__ = ["BindCost", "ServerStartError", "resolve_server", "simulate_round"]
