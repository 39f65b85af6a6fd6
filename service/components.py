"""Component contracts: what a technique, runner, policy, cost model and playbook must provide.

Plugins return instances of these classes from the `register_*` hooks (see `service.hookspecs`).
Hooks are synchronous and cheap; slow work lives in the async methods here (`Runner.run_round`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

import msgspec

from service.domain import (
    SLO,
    BenchSpec,
    ConfigDelta,
    Decision,
    Deployment,
    Hardware,
    ModelSpec,
    Objective,
    RoundResult,
    Scenario,
    ServerConfig,
    WorkloadProfile,
)


class Applicability(msgspec.Struct, frozen=True):
    """Whether a technique applies now, and the casebook rule that says so, in one sentence."""

    applicable: bool
    reason: str


class TuningContext(msgspec.Struct, frozen=True, kw_only=True):
    """What a technique sees: the scenario as accepted so far and the results that led here."""

    scenario: Scenario
    model: ModelSpec
    baseline: RoundResult | None = None
    history: list[RoundResult] = msgspec.field(default_factory=list)
    tried: list[str] = msgspec.field(default_factory=list)


class Technique(ABC):
    """A casebook technique that proposes config deltas."""

    name: ClassVar[str]
    rank: ClassVar[int]
    description: ClassVar[str] = ""
    conflicts: ClassVar[tuple[str, ...]] = ()
    prerequisites: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def applicable(self, ctx: TuningContext) -> Applicability:
        """Whether to try this technique now, with a one-sentence reason."""

    @abstractmethod
    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        """Candidate deltas, best guess first."""


class RunnerCapabilities(msgspec.Struct, frozen=True, kw_only=True):
    restarts_servers: bool
    measures_real_gpus: bool
    needs_gpu: bool


@dataclass(frozen=True)
class RoundContext:
    """What the host hands a runner besides the scenario: the registered cost models and settings."""

    cost_models: dict[str, CostModel] = field(default_factory=dict)
    cost_model: str | None = None
    settings: dict[str, object] = field(default_factory=dict)


class Runner(ABC):
    """Runs one benchmark round of a deployment and reports what it measured."""

    name: ClassVar[str]
    capabilities: ClassVar[RunnerCapabilities]

    @abstractmethod
    async def run_round(self, scenario: Scenario, *, seed: int | None = None,
                        context: RoundContext | None = None) -> RoundResult:
        """Run the scenario's bench against its deployment; never raise for a measurement failure."""


class Policy(ABC):
    """Judges a candidate round against the baseline: pure and deterministic."""

    name: ClassVar[str]

    @abstractmethod
    def decide(
        self,
        baseline: list[RoundResult],
        candidate: list[RoundResult],
        slo: SLO,
        objective: Objective,
    ) -> Decision:
        """A decision carrying the matched pattern, the deciding figures and a checkable sentence."""


class StepCostModel(ABC):
    """Step latency for one server instance, bound to a model, hardware and server config."""

    name: ClassVar[str]

    @abstractmethod
    def prefill_seconds(self, new_tokens: int, cached_tokens: int, requests: int) -> float:
        """Time of a prefill (extend) batch: `new_tokens` computed over `cached_tokens` of context."""

    @abstractmethod
    def decode_seconds(self, batch: int, context_tokens: int) -> float:
        """Time of one decode step for `batch` requests holding `context_tokens` in total."""

    def fallback_steps(self) -> int:
        """Steps this model could not answer from measured data and estimated analytically."""
        return 0


class CostModel(ABC):
    """Factory of step cost models (plugins register these)."""

    name: ClassVar[str]
    description: ClassVar[str] = ""

    @abstractmethod
    def available(self) -> bool:
        """Whether this cost model can answer on this machine (its data or packages are present)."""

    @abstractmethod
    def bind(self, model: ModelSpec, hardware: Hardware, server: ServerConfig) -> StepCostModel:
        """A step cost model for one server instance of `server` on `hardware`."""


class Playbook(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An ordered list of techniques for a scenario, with budget and defaults (data, not code)."""

    name: str
    description: str = ""
    scenario: str | None = None
    techniques: list[str] = msgspec.field(default_factory=list)
    max_rounds: int = 20
    repeats: int = 1
    require_quality_for: list[str] = msgspec.field(default_factory=list)


__all__ = [
    "SLO", "Applicability", "BenchSpec", "CostModel", "Deployment", "Objective", "Playbook", "Policy",
    "RoundContext", "Runner", "RunnerCapabilities", "StepCostModel", "Technique", "TuningContext", "WorkloadProfile",
]
