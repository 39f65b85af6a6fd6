"""Starting points unlike the casebook's: other models, GPUs and deployments, for the applicability rules."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from service import (
    SLO,
    BenchFigures,
    BenchSpec,
    Deployment,
    Hardware,
    LengthDist,
    Provenance,
    RoundResult,
    RoundStatus,
    RouterConfig,
    Scenario,
    ServerConfig,
    Source,
    StructuredOutput,
    TuningContext,
    WorkerGroup,
    WorkloadProfile,
    resolve_model,
)
from service.engine import TuningEngine, parts_from_host
from service.plugin_host import PluginHost
from service.scenario import load_scenario


def deployment(model: str, *, tp: int = 1, replicas: int = 1, **server: object) -> Deployment:
    """`replicas` TP-`tp` workers of `model`, behind a power_of_two router when there are several."""
    router = RouterConfig(policy="power_of_two") if replicas > 1 else None
    group = WorkerGroup(replicas=replicas, server=ServerConfig(model_path=model, tp_size=tp, **server))
    return Deployment(groups=[group], router=router)


def scenario(model: str, gpu: str, gpus: int, dep: Deployment, *, clients: int, slo: SLO | None = None,
             workload: WorkloadProfile | None = None, **fields: object) -> Scenario:
    return Scenario(name="unit", model=model, hardware=Hardware(gpu=gpu, gpus_per_node=gpus), deployment=dep,
                    workload=workload or WorkloadProfile(input=LengthDist(median=900), output=LengthDist(median=600),
                                                         peak_concurrency=clients),
                    slo=slo if slo is not None else SLO(ttft_p95_ms=2000), bench=BenchSpec(max_concurrency=clients),
                    **fields)


def measured(concurrency: float, **bench: float) -> RoundResult:
    """A finished round whose clients held `concurrency` requests in flight on average (all replicas)."""
    figures = BenchFigures(completed=500, duration=60.0, output_throughput=bench.pop("output_throughput", 4000.0),
                           concurrency=concurrency, **bench)
    return RoundResult(status=RoundStatus.OK, provenance=Provenance(source=Source.SIMULATED, runner="unit"),
                       bench=figures)


def context(scen: Scenario, *, baseline: RoundResult | None = None, tried: list[str] | None = None,
            **options: object) -> TuningContext:
    return TuningContext(scenario=scen, model=resolve_model(scen.model), baseline=baseline,
                         history=[baseline] if baseline else [], tried=sorted(tried or []), options=dict(options))


def structured(scen: Scenario, *, dynamic: bool, schemas: int = 0, warmed: bool = False,
               mode: str = "json_schema") -> Scenario:
    out = StructuredOutput(mode=mode, schemas=schemas, dynamic_schemas=dynamic, cache_warmed=warmed)
    return msgspec.structs.replace(scen, workload=msgspec.structs.replace(scen.workload, structured_output=out))


def tune(path: Path, text: str, *techniques: str) -> TuningEngine:
    """A whole `auto` job limited to `techniques`, on the scenario `text` written to `path`: simulated, seed 0,
    one repeat a round, one round at a time."""
    path.write_text(text)
    scen = load_scenario(path)
    host = PluginHost()
    playbook = msgspec.structs.replace(host.get("playbook", "auto"), techniques=list(techniques))
    engine = TuningEngine(parts_from_host(host, playbook, scen, runner="simulated"), playbook, scen, seed=0,
                          repeats=1, parallel=1)
    asyncio.run(engine.run())
    return engine
