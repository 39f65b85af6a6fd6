"""Component contracts: what a technique, runner, policy, cost model and playbook must provide.

Plugins return instances of these classes from the `register_*` hooks (see `service.hookspecs`).
Hooks are synchronous and cheap; slow work lives in the async methods here (`Runner.run_round`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from service.domain import (
    SLO,
    BenchSpec,
    Calibration,
    ConfigDelta,
    Decision,
    Deployment,
    Hardware,
    ModelSpec,
    Objective,
    QualityResult,
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
    options: dict[str, Any] = msgspec.field(default_factory=dict)


class Technique(ABC):
    """A casebook technique that proposes config deltas."""

    name: ClassVar[str]
    rank: ClassVar[int]
    description: ClassVar[str] = ""
    conflicts: ClassVar[tuple[str, ...]] = ()
    prerequisites: ClassVar[tuple[str, ...]] = ()
    # False: the candidates of one `propose` call are alternatives, each judged against the same baseline,
    # and the best kept one wins. True: they are successive steps; the engine runs the first untried one,
    # judges it against the last accepted step, and asks again.
    stepwise: ClassVar[bool] = False
    # A diagnosis that must come before these techniques: when the engine chooses the order (a playbook with
    # `order = "casebook"`) and this technique applies, it runs before the first of them, whatever the ranks.
    diagnoses_before: ClassVar[tuple[str, ...]] = ()
    # Earlier steps a kept change of this technique sends back to: when the engine chooses the order, each
    # of them that measured a round on the line is tried again on the new deployment, right after this one
    # (casebook case 1 re-cuts TP8 into replicas once EAGLE3 is on).
    reopens: ClassVar[tuple[str, ...]] = ()

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
    """What the host hands a runner besides the scenario: the registered cost models, the stored calibrations
    of this scenario's model and GPU (a simulation applies the one that matches, `calibration_for`), and
    settings."""

    cost_models: dict[str, CostModel] = field(default_factory=dict)
    cost_model: str | None = None
    settings: dict[str, object] = field(default_factory=dict)
    calibrations: list[Calibration] = field(default_factory=list)
    # One job's own measurements, for a runner that learns from them (`hybrid`): the engine builds one
    # context per job, so this lives as long as the job.
    measured: MeasuredHere = field(default_factory=lambda: MeasuredHere())


@dataclass
class MeasuredHere:
    """What a runner measured for real in one job, in order; the calibration it fitted on them; and, for each
    screened candidate that was then measured, its technique and how far its predicted change from the
    baseline was from the measured change (the largest relative error of the compared figures)."""

    rounds: list[tuple[Scenario, RoundResult]] = field(default_factory=list)
    calibration: Calibration | None = None
    prediction_errors: list[tuple[str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Prediction:
    """A runner's prediction of a round: one result per seed, and the relative error it is trusted to (by the
    calibration's fit; the engine widens it by how far the job's earlier predictions were from the
    measurements that followed, `service.engine.screen.widened`)."""

    results: list[RoundResult]
    uncertainty: float
    basis: str  # what the prediction rests on: `calibrated [cal_...] on 2 rounds of ...`
    # Of a step's candidates the policy keeps even at the pessimistic end, how many are measured.
    measure_top_k: int = 1


class Runner(ABC):
    """Runs one benchmark round of a deployment and reports what it measured."""

    name: ClassVar[str]
    capabilities: ClassVar[RunnerCapabilities]

    @abstractmethod
    async def run_round(self, scenario: Scenario, *, seed: int | None = None,
                        context: RoundContext | None = None) -> RoundResult:
        """Run the scenario's bench against its deployment; never raise for a measurement failure."""

    async def predict(self, scenario: Scenario, seeds: list[int],
                      context: RoundContext | None = None) -> Prediction | None:
        """What a round of `scenario` would measure on each seed, from a model calibrated on this runner's own
        measurements, without measuring it; None (the default) when this runner does not predict.

        The engine measures for real only the candidates a prediction cannot rule out (`service.engine.screen`).
        """
        return None

    async def parallel_rounds(self, scenario: Scenario, context: RoundContext | None = None) -> int:
        """How many rounds of deployments the size of `scenario`'s this runner can measure at once.

        The engine measures a technique's alternatives and a round's repeats concurrently up to this many,
        each `run_round` call on its own deployment, and decides on them in the order a sequential run
        would. The default, 1, measures one round after another (one host's GPUs hold one deployment).
        """
        return 1


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

    def memo_key(self) -> object | None:
        """A hashable key under which this binding's answers may be shared by every step model of the process
        that returns an equal key (answers depend only on the key and the step's arguments); None: never."""
        return None

    # Optional refinements: cost models may override these; the defaults derive from the two steps above.

    def frontend_seconds(self, input_tokens: int) -> float:
        """Host time a request spends before the scheduler sees it (HTTP, tokenization), counted in its TTFT and
        end-to-end latency but in no forward step."""
        return 0.0

    def mixed_seconds(self, new_tokens: int, cached_tokens: int, requests: int, batch: int,
                      context_tokens: int) -> float:
        """One forward pass carrying a prefill chunk and a decode batch (`--enable-mixed-chunk`)."""
        decode = self.decode_seconds(batch, context_tokens) if batch > 0 else 0.0
        return self.prefill_seconds(new_tokens, cached_tokens, requests) + decode

    def speculative_step_seconds(self, batch: int, context_tokens: int, draft_tokens: int, draft_steps: int,
                                 topk: int = 1) -> float:
        """One speculative round: `draft_steps` draft passes, then a verify of `draft_tokens` per request.

        The default prices the verify as a decode step over `batch x draft_tokens` tokens reading the same
        KV, and each draft pass (EAGLE's one-layer head) at a twentieth of a decode step.
        """
        verify = self.decode_seconds(batch * max(draft_tokens, 1), context_tokens)
        return verify + max(draft_steps, 0) * 0.05 * self.decode_seconds(batch * max(topk, 1), 0)

    def transfer_seconds(self, nbytes: float, gbps: float) -> float:
        """Time to move `nbytes` over a `gbps` GB/s link (HiCache tiers, PD KV transfer) on this model's clock."""
        return max(nbytes, 0.0) / (max(gbps, 1e-9) * 1e9)

    def expert_share(self, batch: int, context_tokens: int) -> float:
        """Share of a decode step spent in MoE expert layers (0 for dense), so EP imbalance can scale it."""
        return 0.0

    def includes_expert_skew(self) -> bool:
        """Whether expert-parallel step times already carry a skewed expert load (kernels measured under
        skewed routing with a static placement), so a simulator scales them by EPLB's balance relative to
        that placement instead of applying the imbalance on top."""
        return False

    def bound_tokens_per_second(self) -> float:
        """An upper bound on generated tokens per second of this server instance (infinite when unknown)."""
        return float("inf")

    def describe(self) -> str:
        """One line of provenance: what answered (data source, version, any mapping to a similar model)."""
        return self.name


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
    """An ordered list of techniques for a scenario, with budget and defaults (data, not code).

    `techniques` run in the listed order, or by the casebook's tuning order when `order = "casebook"` (an
    empty list means every registered technique). `scenario` is a scenario file relative to the playbook.
    Budget: `max_rounds` candidate rounds and `max_gpu_minutes`. `repeats` runs each round with that many
    seeds; `bench` overrides the scenario's bench settings for every round. Techniques in
    `require_quality_for` are accepted only with a passing result in the scenario's (or this playbook's)
    `quality` list; `options` holds per-technique settings; `source` is set by the loader. `beam_width`
    counts the search's lines: the main line and up to `beam_width - 1` branches started from candidates
    rolled back only because they missed an SLO while improving the objective (1 turns branching off).
    """

    name: str
    description: str = ""
    scenario: str | None = None
    techniques: list[str] = msgspec.field(default_factory=list)
    max_rounds: int = 20
    repeats: int = 1
    require_quality_for: list[str] = msgspec.field(default_factory=list)
    order: Literal["listed", "casebook"] = "listed"
    runner: str | None = None
    policy: str = "casebook"
    max_gpu_minutes: float | None = None
    quality: list[QualityResult] = msgspec.field(default_factory=list)
    quality_tolerance: float = 0.02
    options: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    source: str = ""
    # BenchSpec fields every round of this playbook runs with (e.g. a smaller `num_prompts` per repeat).
    bench: dict[str, Any] = msgspec.field(default_factory=dict)
    beam_width: Annotated[int, msgspec.Meta(ge=1, le=8)] = 2


__all__ = [
    "SLO", "Applicability", "BenchSpec", "CostModel", "Deployment", "Objective", "Playbook", "Policy",
    "RoundContext", "Runner", "RunnerCapabilities", "StepCostModel", "Technique", "TuningContext", "WorkloadProfile",
]
