"""A small analytical step cost model: the simulator's own reference for tests and plugin-free use.

Step time = launch overhead + max(bytes from HBM / bandwidth, FLOPs / tensor rate) + per-layer all-reduce
latency; enough to give right directions (memory-bound small batches, compute-bound large ones) without
a cost-model plugin. The `roofline` and `aiconfigurator` plugins are the calibrated models.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from service.components import StepCostModel
from service.domain import Hardware, ModelSpec, ServerConfig

MATH_EFFICIENCY, HBM_EFFICIENCY = 0.6, 0.8
DECODE_OVERHEAD_S, PREFILL_OVERHEAD_S = 0.4e-3, 1.0e-3
ALLREDUCE_S_PER_LAYER = 8e-6


@dataclass(frozen=True)
class AnalyticStepCost(StepCostModel):
    """Roofline step times of one server instance."""

    name: ClassVar[str] = "analytic"
    model: ModelSpec
    hardware: Hardware
    server: ServerConfig

    @property
    def _gpus(self) -> int:
        return max(self.server.tp_size, 1)

    def _flops_per_s(self) -> float:
        spec = self.hardware.spec
        tflops = spec.fp8_tflops if self.server.weight_dtype == "fp8" and spec.supports_fp8 else spec.bf16_tflops
        return tflops * 1e12 * MATH_EFFICIENCY * self._gpus

    def _bytes_per_s(self) -> float:
        return self.hardware.spec.hbm_bandwidth_tbps * 1e12 * HBM_EFFICIENCY * self._gpus

    def _comm(self) -> float:
        return ALLREDUCE_S_PER_LAYER * self.model.num_layers * (self._gpus > 1) * (1 + self._gpus / 8)

    def prefill_seconds(self, new_tokens: int, cached_tokens: int, requests: int) -> float:
        active = self.model.params_active
        per_req_ctx = (cached_tokens + new_tokens / 2) / max(requests, 1)
        flops = 2 * active * new_tokens + 4 * self.model.num_layers * self.model.hidden_size * new_tokens * per_req_ctx
        weights = self.model.weight_bytes(self.server.weight_dtype)
        return PREFILL_OVERHEAD_S + max(flops / self._flops_per_s(), weights / self._bytes_per_s()) + self._comm()

    def decode_seconds(self, batch: int, context_tokens: int) -> float:
        weights = self.model.active_weight_bytes(self.server.weight_dtype) if batch < 8 else \
            self.model.weight_bytes(self.server.weight_dtype) * min(1.0, batch * max(
                self.model.experts_per_token, 1) / max(self.model.num_experts, 1)) if self.model.is_moe else \
            self.model.weight_bytes(self.server.weight_dtype)
        kv = context_tokens * self.model.kv_bytes_per_token(self.server.kv_dtype)
        flops = 2 * self.model.params_active * batch
        return DECODE_OVERHEAD_S + max((weights + kv) / self._bytes_per_s(), flops / self._flops_per_s()) + self._comm()


def analytic_binder(model: ModelSpec, hardware: Hardware) -> Callable[[ServerConfig], StepCostModel]:
    """`bind(server)` for `simulate_round` using the analytic model."""
    def bind(server: ServerConfig) -> StepCostModel:
        return AnalyticStepCost(model=model, hardware=hardware, server=server)
    return bind
