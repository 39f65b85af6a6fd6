"""The `aiconfigurator` cost model: step times from aiconfigurator-core's measured SGLang kernel data.

Measured H100/H200 data answer where they exist; a step they cannot answer (a shape or quant combination
with no data, a GPU without data) is estimated by the roofline on the physical clock and counted in
`fallback_steps()`. The model never raises for a step.

The simulator asks for step costs millions of times, so answers are memoised on a geometric grid (batch and
per-request context for decode; requests, new and cached tokens per request for prefill) and interpolated
linearly between grid points: a case-1 round needs a few thousand engine calls at most.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgspec

from plugins.cost_models.aic_engines import (
    ExpertSwap,
    aic_module_name,
    aic_system,
    bundled_spec,
    compile_engine,
    deepep_expert_swap,
    gather_dispatch_ops_json,
    gathers_moe_input,
    uses_alltoall,
)
from plugins.cost_models.roofline import RooflineCostModel, RooflineStep
from service import CostModel, Hardware, ModelSpec, ServerConfig, StepCostModel

# Grid points grow by 1/8 (12.5%) above this many, exact below: the interpolation error stays under ~1%.
GRID_RATIO = 1.125
EXACT_BELOW = 16
GRID_MAX = 1 << 22


def _grid(start: int) -> list[int]:
    points = list(range(start, EXACT_BELOW + 1))
    value = float(EXACT_BELOW)
    while value < GRID_MAX:
        value *= GRID_RATIO
        if int(value) > points[-1]:
            points.append(int(value))
    return points


COUNT_GRID = _grid(1)
TOKEN_GRID = _grid(0)


def bracket(x: float, grid: list[int]) -> tuple[int, int, float]:
    """Grid points around `x` and the fraction of the way from the lower to the upper."""
    x = min(max(x, grid[0]), grid[-1])
    i = bisect.bisect_left(grid, x)
    if grid[i] == x:
        return grid[i], grid[i], 0.0
    lo, hi = grid[i - 1], grid[i]
    return lo, hi, (x - lo) / (hi - lo)


@dataclass
class AiconfiguratorStep(StepCostModel):
    """Measured step times of one server instance, memoised, with counted roofline fallbacks."""

    name: ClassVar[str] = "aiconfigurator"
    engine: Any | None
    fallback: RooflineStep
    source: str
    reason: str = ""
    fallbacks: int = 0
    engine_calls: int = 0
    # Set when the server runs DeepEP (`--moe-a2a-backend deepep`): the measured gather/reduce dispatch ops
    # to take out of every step (aiconfigurator prices SGLang's `none` path), replaced by the all-to-all.
    gather_dispatch_json: str | None = None
    alltoall: bool = False
    # EP without an all-to-all backend: the measured step's gather/reduce is what SGLang runs.
    gathered: bool = False
    # Also under DeepEP with FP8 block weights: the measured fused-Triton expert op the step prices, and the
    # DeepGEMM expert op SGLang runs instead (`aic_engines.deepep_expert_swap`).
    expert_swap: ExpertSwap | None = None
    expert_swap_misses: int = 0
    # Set when the engine measured the server's BF16 twin (no measured data for its FP8 weights or KV): the
    # roofline of that twin, so each measured step is scaled by the roofline's own FP8-over-BF16 ratio.
    twin: RooflineStep | None = None
    _memo: dict[tuple[Any, ...], float | None] = field(default_factory=dict)

    def fallback_steps(self) -> int:
        return self.fallbacks

    def memo_key(self) -> object:
        # Engines are compiled once per process and per compile key (fmha quant included), so the engine's
        # identity and the roofline's key fix every answer.
        return ("aiconfigurator", id(self.engine) if self.engine is not None else None, self.fallback.memo_key(),
                self.source, self.reason, self.twin.memo_key() if self.twin is not None else None)

    def describe(self) -> str:
        if self.engine is None:
            return f"aiconfigurator unavailable ({self.reason}); every step from the physical roofline"
        swap = ""
        if self.alltoall:
            swap = "; DeepEP all-to-all from the roofline in place of the measured gather/reduce"
        elif self.gathered:
            swap = ("; EP without an all-to-all backend: every rank's tokens gathered onto each GPU and the MoE "
                    "output reduced back (SGLang's --moe-a2a-backend none), as aiconfigurator-core prices it")
        if self.expert_swap is not None:
            swap += ("; routed experts from aiconfigurator's measured SGLang DeepEP expert rows (DeepGEMM) at "
                     f"{self.expert_swap.note}, in place of the fused Triton rows")
            if self.expert_swap_misses:
                swap += " (the fused rows kept where either has no data for a step's shape)"
        if self.twin is not None:
            measured = self.twin.shape
            asked = self.fallback.shape
            what = []
            if measured.model.name != asked.model.name:
                what.append(f"{measured.model.name}'s measured steps")
            if measured.server.weight_dtype != asked.server.weight_dtype or measured.server.kv_dtype != asked.server.kv_dtype:
                what.append("its BF16 server's (no measured data for its FP8 weights or KV)")
            swap += (f"; {' and '.join(what) or 'the measured steps'} scaled by the roofline's ratio for each step "
                     f"(to {asked.model.name} as configured)")
        return f"aiconfigurator-core measured SGLang data via {self.source}; roofline where data is missing{swap}"

    # -- engine access ---------------------------------------------------------------------------------------

    def _measured_ms(self, key: tuple[Any, ...], call: Callable[[], float]) -> float | None:
        if key not in self._memo:
            self.engine_calls += 1
            try:
                value = float(call())
                self._memo[key] = value if value > 0 and value == value and value != float("inf") else None
            except Exception:  # noqa: BLE001 - missing perf data for one shape: answer analytically instead
                self._memo[key] = None
        return self._memo[key]

    def _decode_ms(self, batch: int, per_request: int) -> float | None:
        engine = self.engine
        return self._measured_ms(("decode", batch, per_request),
                                 lambda: engine.decode_step_latency(batch, max(per_request, 1), 0))

    def _prefill_ms(self, requests: int, new: int, cached: int) -> float | None:
        engine = self.engine
        return self._measured_ms(("prefill", requests, new, cached),
                                 lambda: engine.predict_prefill_latency(requests, new + cached, cached))

    # -- steps -----------------------------------------------------------------------------------------------

    def decode_seconds(self, batch: int, context_tokens: int) -> float:
        batch = max(batch, 1)
        measured = self._measured_decode(batch, max(context_tokens, 0) / batch) if self.engine else None
        if measured is not None and self.alltoall:
            replaced = self._comm_and_experts_ms(False, batch)
            measured = self._with_alltoall(measured, replaced, batch, prefill=False)
        if measured is None:
            self.fallbacks += 1
            return self.fallback.decode_seconds(batch, context_tokens)
        if self.twin is not None:
            measured *= self.fallback.decode_seconds(batch, context_tokens) / self.twin.decode_seconds(
                batch, context_tokens)
        return measured

    def _measured_decode(self, batch: int, per_request: float) -> float | None:
        b_lo, b_hi, b_frac = bracket(batch, COUNT_GRID)
        c_lo, c_hi, c_frac = bracket(per_request, TOKEN_GRID)
        corners = [self._decode_ms(b, c) for b in (b_lo, b_hi) for c in (c_lo, c_hi)]
        if any(value is None for value in corners):
            return None
        lo_b = corners[0] + (corners[1] - corners[0]) * c_frac
        hi_b = corners[2] + (corners[3] - corners[2]) * c_frac
        return (lo_b + (hi_b - lo_b) * b_frac) / 1e3

    def prefill_seconds(self, new_tokens: int, cached_tokens: int, requests: int) -> float:
        new_tokens = max(new_tokens, 1)
        requests = max(min(requests, new_tokens), 1)
        measured = self._measured_prefill(new_tokens, max(cached_tokens, 0), requests) if self.engine else None
        if measured is not None and self.alltoall:
            replaced = self._comm_and_experts_ms(True, new_tokens)
            measured = self._with_alltoall(measured, replaced, new_tokens, prefill=True)
        if measured is None:
            self.fallbacks += 1
            return self.fallback.prefill_seconds(new_tokens, cached_tokens, requests)
        if self.twin is not None:
            measured *= self.fallback.prefill_seconds(new_tokens, cached_tokens, requests) / self.twin.prefill_seconds(
                new_tokens, cached_tokens, requests)
        return measured

    def _measured_prefill(self, new_tokens: int, cached_tokens: int, requests: int) -> float | None:
        # Requests snap to the grid (the total token count is kept); new and cached tokens interpolate.
        r = bracket(requests, COUNT_GRID)[0]
        n_lo, n_hi, n_frac = bracket(new_tokens / r, COUNT_GRID)
        c_lo, c_hi, c_frac = bracket(cached_tokens / r, TOKEN_GRID)
        corners = [self._prefill_ms(r, n, c) for n in (n_lo, n_hi) for c in (c_lo, c_hi)]
        if any(value is None for value in corners):
            return None
        lo_n = corners[0] + (corners[1] - corners[0]) * c_frac
        hi_n = corners[2] + (corners[3] - corners[2]) * c_frac
        return (lo_n + (hi_n - lo_n) * n_frac) / 1e3

    # -- DeepEP: the measured step without its gather/reduce dispatch, plus the all-to-all ------------------

    def _ops_ms(self, tag: str, ops_json: str | None, prefill: bool, count: float) -> float | None:
        """ms of an aiconfigurator MoE op list for `count` tokens (prefill) or requests (decode) of one DP rank.

        MoE ops see tokens only, so a decode step's context length does not enter (it is fixed at 1,024).
        """
        engine = self.engine
        if engine is None or ops_json is None:
            return None
        lo, hi, frac = bracket(count, COUNT_GRID)

        def one(point: int) -> float | None:
            def call() -> float:
                rows = engine.evaluate_ops_json(ops_json, prefill, 1 if prefill else point,
                                                point if prefill else 1024, 0)
                return sum(float(row[1]) for row in rows)
            return self._measured_ms((tag, prefill, point), call)

        a, b = one(lo), one(hi)
        return None if a is None or b is None else a + (b - a) * frac

    def _comm_and_experts_ms(self, prefill: bool, count: int) -> float | None:
        """ms the measured step spends on what a DeepEP server runs differently: the gather/reduce dispatch,
        and (with FP8 block weights) the fused Triton expert GEMMs in place of DeepGEMM's."""
        gather = self._ops_ms("gather", self.gather_dispatch_json, prefill, count)
        swap = self.expert_swap
        if gather is None or swap is None:
            return gather
        fused = self._ops_ms("fused", swap.fused_json, prefill, count)
        parts = swap.deepep_context if prefill else swap.deepep_generation
        priced = [self._ops_ms(f"deepep{i}", ops, prefill, max(count * swap.token_scale * factor, 1.0))
                  for i, (ops, _, factor) in enumerate(parts)]
        if fused is None or None in priced:
            self.expert_swap_misses += 1
            return gather
        return gather + fused - sum(ms * weight for ms, (_, weight, _) in zip(priced, parts, strict=True))

    def _with_alltoall(self, measured: float, replaced_ms: float | None, tokens: int, prefill: bool) -> float | None:
        """`measured` seconds without `replaced_ms` (the gather/reduce path), plus DeepEP's dispatch + combine."""
        if replaced_ms is None:
            return None
        alltoall = self.fallback.moe_alltoall_seconds(tokens, prefill)
        step = max(measured - replaced_ms / 1e3, 0.1 * measured) + alltoall
        return self.fallback.overlap_alltoall(step, alltoall)

    # -- refinements: measured steps scaled by the roofline's ratios ----------------------------------------

    def mixed_seconds(self, new_tokens: int, cached_tokens: int, requests: int, batch: int,
                      context_tokens: int) -> float:
        separate = self.prefill_seconds(new_tokens, cached_tokens, requests)
        if batch <= 0:
            return separate
        separate += self.decode_seconds(batch, context_tokens)
        roof = self.fallback
        together = roof.mixed_seconds(new_tokens, cached_tokens, requests, batch, context_tokens)
        apart = roof.prefill_seconds(new_tokens, cached_tokens, requests) + roof.decode_seconds(batch, context_tokens)
        return separate * together / apart

    def speculative_step_seconds(self, batch: int, context_tokens: int, draft_tokens: int, draft_steps: int,
                                 topk: int = 1) -> float:
        roof = self.fallback
        ratio = roof.speculative_step_seconds(batch, context_tokens, draft_tokens, draft_steps, topk) \
            / roof.decode_seconds(batch, context_tokens)
        return self.decode_seconds(batch, context_tokens) * ratio

    def expert_share(self, batch: int, context_tokens: int) -> float:
        return self.fallback.expert_share(batch, context_tokens)

    def includes_expert_skew(self) -> bool:
        # aiconfigurator-core's MoE rows are collected under power-law routing (its DeepSeek and MoE models
        # default to `workload_distribution = "power_law"`, alpha 1.01, and ship no uniform rows), so an EP
        # step already waits for the busiest rank of a static placement.
        return self.engine is not None and self.fallback.shape.ep > 1

    def bound_tokens_per_second(self) -> float:
        return self.fallback.bound_tokens_per_second()


class AiconfiguratorCostModel(CostModel):
    """Measured SGLang kernel timings from aiconfigurator-core (H100-SXM and H200-SXM)."""

    name: ClassVar[str] = "aiconfigurator"
    description: ClassVar[str] = ("aiconfigurator-core's measured H100/H200 SGLang kernel data; physical "
                                  "roofline for shapes it has no data for (counted as fallback steps)")

    def __init__(self, fmha_quant: str | None = None) -> None:
        # `fmha_quant` forces the attention compute dtype (e.g. "bfloat16" with an FP8 KV cache).
        self.fmha_quant = fmha_quant

    def available(self) -> bool:
        return aic_module_name() is not None

    def supports(self, hardware: Hardware) -> bool:
        """Whether measured data exists for this GPU (other GPUs answer every step from the roofline)."""
        return self.available() and aic_system(hardware) is not None

    def bind(self, model: ModelSpec, hardware: Hardware, server: ServerConfig) -> AiconfiguratorStep:
        fallback = RooflineCostModel(clock=1.0).bind(model, hardware, server)
        if not self.available():
            return AiconfiguratorStep(engine=None, fallback=fallback, source="",
                                      reason="aiconfigurator-core is not installed")
        compiled = compile_engine(model, hardware, server, self.fmha_quant)
        measured_server = server
        if (compiled.engine is None or compiled.partial) and not model.prequantized and self.fmha_quant is None and (
                server.weight_dtype == "fp8" or server.kv_dtype.startswith("fp8")):
            # No measured data for the FP8 modes, or none for a typical step (GLM-4.5-Air's expert shape fits no
            # FP8 block at MoE TP4; Qwen3.6-35B-A3B's FP8 rows stop short of MoE TP8): the BF16 server's measured
            # steps, scaled by the roofline's FP8-over-BF16 ratio, so every step of the server stands on one
            # basis rather than a mix of measured and roofline answers. A forced attention mode (`fmha_quant`) is
            # priced as asked, its missing steps from the roofline.
            bf16 = msgspec.structs.replace(server, quantization=None, kv_cache_dtype=None)
            measured_twin = compile_engine(model, hardware, bf16, self.fmha_quant)
            if measured_twin.engine is not None and (compiled.engine is None or not measured_twin.partial):
                compiled, measured_server = measured_twin, bf16
        # The steps measured another model (the nearest bundled one) or server: each is scaled by the roofline's
        # ratio between what is asked and what was measured.
        measured_model = (bundled_spec(compiled.proxy) if compiled.proxy else None) or model
        twin = None
        if measured_model is not model or measured_server is not server:
            twin = RooflineCostModel(clock=1.0).bind(measured_model, hardware, measured_server)
        alltoall = compiled.engine is not None and uses_alltoall(model, server)
        return AiconfiguratorStep(engine=compiled.engine, fallback=fallback, source=compiled.source,
                                  reason=compiled.error, alltoall=alltoall, twin=twin,
                                  gathered=compiled.engine is not None and gathers_moe_input(model, server),
                                  gather_dispatch_json=gather_dispatch_ops_json(model, server) if alltoall else None,
                                  expert_swap=deepep_expert_swap(model, server) if alltoall else None)
