"""Fake runner, policy and techniques for engine tests: deterministic and readable figures."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import msgspec

from service import (
    SLO,
    Applicability,
    BenchFigures,
    ConfigDelta,
    Decision,
    Deployment,
    Hardware,
    ModelSpec,
    Objective,
    Pattern,
    Policy,
    Provenance,
    RoundContext,
    RoundResult,
    RoundStatus,
    Runner,
    RunnerCapabilities,
    Scenario,
    ServerConfig,
    Source,
    Technique,
    TuningContext,
    Verdict,
    WorkerGroup,
)
from service.domain.model import Architecture, AttentionKind

Figures = Callable[[Scenario], dict[str, float]]


def ok_result(**bench: float) -> RoundResult:
    return RoundResult(status=RoundStatus.OK, provenance=Provenance(source=Source.SIMULATED, runner="fake"),
                       bench=BenchFigures(duration=60.0, **bench))


class FakeRunner(Runner):
    """Figures come from a function of the scenario; `fail` makes every round after the baseline fail."""

    name: ClassVar[str] = "fake"
    capabilities: ClassVar[RunnerCapabilities] = RunnerCapabilities(
        restarts_servers=False, measures_real_gpus=False, needs_gpu=False)

    def __init__(self, figures: Figures, *, fail_after: int | None = None, raise_error: bool = False) -> None:
        self.figures = figures
        self.fail_after = fail_after
        self.raise_error = raise_error
        self.calls: list[tuple[Scenario, int | None]] = []

    async def run_round(self, scenario: Scenario, *, seed: int | None = None,
                        context: RoundContext | None = None) -> RoundResult:
        self.calls.append((scenario, seed))
        if self.fail_after is not None and len(self.calls) > self.fail_after:
            if self.raise_error:
                raise RuntimeError("worker died mid-round")
            return RoundResult(status=RoundStatus.PARTIAL, error="2 of 500 requests failed",
                               provenance=Provenance(source=Source.SIMULATED, runner="fake"))
        return ok_result(**self.figures(scenario))


class ThroughputPolicy(Policy):
    """Keeps a candidate when output throughput rises 3%+ or p99 TTFT falls 10%+ without throughput -5%."""

    name: ClassVar[str] = "fake"

    def decide(self, baseline: list[RoundResult], candidate: list[RoundResult], slo: SLO,
               objective: Objective) -> Decision:
        if any(r.status is not RoundStatus.OK for r in candidate):
            return Decision(verdict=Verdict.ERROR, pattern=Pattern.NOT_APPLICABLE, reasons=["failed"])
        b, c = baseline[0].bench, candidate[0].bench
        tput = (c.output_throughput - b.output_throughput) / b.output_throughput
        tail = (c.p99_ttft_ms - b.p99_ttft_ms) / b.p99_ttft_ms if b.p99_ttft_ms else 0.0
        if tput >= 0.03:
            return Decision(verdict=Verdict.ACCEPT, pattern=Pattern.THROUGHPUT_UP_LATENCY_DOWN,
                            reasons=[f"throughput {tput:+.1%}"])
        if tail <= -0.10 and tput > -0.05:
            return Decision(verdict=Verdict.KEEP_TRADEOFF, pattern=Pattern.THROUGHPUT_DOWN_TAIL_DOWN,
                            reasons=[f"p99 TTFT {tail:+.1%}"])
        return Decision(verdict=Verdict.ROLLBACK, pattern=Pattern.THROUGHPUT_DOWN_LATENCY_UP,
                        reasons=[f"throughput {tput:+.1%}, p99 TTFT {tail:+.1%}"])


class SweepTechnique(Technique):
    """Proposes chunk sizes in order, the next smaller one each time (like chunked_prefill)."""

    name: ClassVar[str] = "sweep"
    rank: ClassVar[int] = 3

    def __init__(self, sizes: list[int], applicable: bool = True, one_at_a_time: bool = True) -> None:
        self.sizes = sizes
        self._applicable = applicable
        self.one_at_a_time = one_at_a_time

    def applicable(self, ctx: TuningContext) -> Applicability:
        return Applicability(self._applicable, "the fake sweep applies when asked to in this test")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        current = ctx.scenario.deployment.groups[0].server.chunked_prefill_size
        smaller = [s for s in self.sizes if current is None or s < current]
        return [ConfigDelta(technique=self.name, summary=f"chunk {s}", set_server={"chunked_prefill_size": s})
                for s in (smaller[:1] if self.one_at_a_time else smaller)]


class ModelTechnique(Technique):
    name: ClassVar[str] = "model_selection"
    rank: ClassVar[int] = 1

    def applicable(self, ctx: TuningContext) -> Applicability:
        return Applicability(True, "a smaller model is worth trying in this test")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        return [ConfigDelta(technique=self.name, summary="model small", model="org/small-9B")]


def model_spec(name: str = "org/big-27B") -> ModelSpec:
    return ModelSpec(name=name, architecture=Architecture.DENSE, attention=AttentionKind.GQA, params_total=27e9,
                     params_active=27e9, num_layers=48, hidden_size=5120, num_attention_heads=40, num_kv_heads=8,
                     head_dim=128, vocab_size=150000, max_context=262144)


def scenario(**changes: object) -> Scenario:
    base = Scenario(name="unit", model="org/big-27B", hardware=Hardware(gpu="H200-SXM"),
                    deployment=Deployment(groups=[WorkerGroup(server=ServerConfig(model_path="org/big-27B",
                                                                                  tp_size=8))]))
    return msgspec.structs.replace(base, **changes)


def chunk_figures(scenario: Scenario) -> dict[str, float]:
    """4096 is a tail win for a little throughput; 2048 gains little tail for more throughput (casebook case 1)."""
    chunk = scenario.deployment.groups[0].server.chunked_prefill_size
    table = {None: (1554.0, 4381.0), 4096: (1499.0, 1621.0), 2048: (1402.0, 1584.0), 1024: (1300.0, 1570.0)}
    tput, p99 = table[chunk]
    small = scenario.model.endswith("9B")
    return {"output_throughput": tput * (2.75 if small else 1.0), "p99_ttft_ms": p99, "median_ttft_ms": 600.0,
            "p95_ttft_ms": p99 * 0.8, "median_itl_ms": 28.0}
