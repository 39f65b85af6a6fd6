"""A cost model with a calibration's corrections applied to every step it prices."""

from __future__ import annotations

from typing import ClassVar

from service.components import CostModel, StepCostModel
from service.domain import Hardware, ModelSpec, ServerConfig
from service.domain.calibration import Calibration, Factors


class CorrectedStepCost(StepCostModel):
    """`base` with `factors` applied: prefill and decode times scaled, fixed per-step and per-request costs
    added, and a host delay before each request reaches the scheduler. Transfers (HiCache, PD) are left as the
    base prices them."""

    name: ClassVar[str] = "corrected"

    def __init__(self, base: StepCostModel, factors: Factors, label: str = "") -> None:
        self.base = base
        self.factors = factors
        self.label = label
        self._step = factors.step_ms / 1e3
        self._request = factors.request_ms / 1e3
        self._frontend = factors.frontend_ms / 1e3

    def prefill_seconds(self, new_tokens: int, cached_tokens: int, requests: int) -> float:
        return (self.factors.prefill * self.base.prefill_seconds(new_tokens, cached_tokens, requests)
                + self._step + self._request * max(requests, 0))

    def decode_seconds(self, batch: int, context_tokens: int) -> float:
        return self.factors.decode * self.base.decode_seconds(batch, context_tokens) + self._step

    def mixed_seconds(self, new_tokens: int, cached_tokens: int, requests: int, batch: int,
                      context_tokens: int) -> float:
        # The base's mixed pass, its prefill and decode shares scaled by their own factors.
        prefill = self.base.prefill_seconds(new_tokens, cached_tokens, requests)
        decode = self.base.decode_seconds(batch, context_tokens) if batch > 0 else 0.0
        mixed = self.base.mixed_seconds(new_tokens, cached_tokens, requests, batch, context_tokens)
        parts = prefill + decode
        scale = (self.factors.prefill * prefill + self.factors.decode * decode) / parts if parts > 0 else 1.0
        return mixed * scale + self._step + self._request * max(requests, 0)

    def speculative_step_seconds(self, batch: int, context_tokens: int, draft_tokens: int, draft_steps: int,
                                 topk: int = 1) -> float:
        base = self.base.speculative_step_seconds(batch, context_tokens, draft_tokens, draft_steps, topk)
        return self.factors.decode * base + self._step

    def frontend_seconds(self, input_tokens: int) -> float:
        return self.base.frontend_seconds(input_tokens) + self._frontend

    def transfer_seconds(self, nbytes: float, gbps: float) -> float:
        return self.base.transfer_seconds(nbytes, gbps)

    def expert_share(self, batch: int, context_tokens: int) -> float:
        return self.base.expert_share(batch, context_tokens)

    def includes_expert_skew(self) -> bool:
        return self.base.includes_expert_skew()

    def fallback_steps(self) -> int:
        return self.base.fallback_steps()

    def memo_key(self) -> object | None:
        key = self.base.memo_key()
        return None if key is None else ("corrected", key, tuple(self.factors.vector()))

    def bound_tokens_per_second(self) -> float:
        # Faster steps than the base's raise the bound by as much; slower ones leave it where physics puts it.
        return self.base.bound_tokens_per_second() / min(self.factors.decode, 1.0)

    def describe(self) -> str:
        return f"{self.base.describe()}; {self.label}" if self.label else self.base.describe()


class CalibratedCostModel(CostModel):
    """A registered cost model bound through a calibration (or through bare factors while fitting one)."""

    name: ClassVar[str] = "calibrated"
    description: ClassVar[str] = "a cost model with a calibration's corrections"

    def __init__(self, base: CostModel, factors: Factors, label: str = "") -> None:
        self.base = base
        self.factors = factors
        self.label = label

    @classmethod
    def of(cls, base: CostModel, calibration: Calibration) -> CalibratedCostModel:
        return cls(base, calibration.factors, calibration.describe())

    def available(self) -> bool:
        return self.base.available()

    def bind(self, model: ModelSpec, hardware: Hardware, server: ServerConfig) -> StepCostModel:
        return CorrectedStepCost(self.base.bind(model, hardware, server), self.factors, self.label)
