"""The cost-model contract: what the simulator relies on from every cost model's step times.

The simulator binds one step model per server and asks it for every prefill, decode, mixed and
speculative step of a round; it needs positive finite times that grow with the work, a count of the
steps answered analytically, and a line of provenance.
"""

from __future__ import annotations

import math
from typing import ClassVar

import pytest

from service.components import CostModel, StepCostModel
from service.domain import Hardware, ServerConfig, resolve_model

# (model, hardware, server): one dense model at TP8 in FP8 on H200, one MoE model at TP2 in BF16 on H100.
SHAPES: dict[str, tuple[str, Hardware, ServerConfig]] = {
    "dense-tp8": ("Qwen/Qwen3.6-27B", Hardware(gpu="H200-SXM"),
                  ServerConfig(tp_size=8, quantization="fp8", kv_cache_dtype="fp8_e5m2")),
    "moe-tp2": ("Qwen/Qwen3.6-35B-A3B", Hardware(gpu="H100-SXM"), ServerConfig(tp_size=2)),
}


def _rising(times: list[float], noise: float) -> bool:
    return all(later >= earlier * noise for earlier, later in zip(times, times[1:], strict=False))


class CostModelContract:
    """Subclass and provide a `cost_model` fixture to run the suite.

    Override `shape` to bind other (model, hardware, server) triples; a cost model that is not
    `available()` here is skipped, not failed. `noise` is how far a later, larger step may fall below an
    earlier one (measured kernel tables carry noise of a fraction of a percent: 0.99 allows 1%).
    """

    noise: ClassVar[float] = 0.99

    @pytest.fixture(params=sorted(SHAPES))
    def shape(self, request: pytest.FixtureRequest) -> tuple[str, Hardware, ServerConfig]:
        return SHAPES[request.param]

    @pytest.fixture
    def step(self, cost_model: CostModel, shape: tuple[str, Hardware, ServerConfig]) -> StepCostModel:
        assert isinstance(cost_model, CostModel) and cost_model.name
        available = cost_model.available()
        assert isinstance(available, bool)
        if not available:
            pytest.skip(f"{cost_model.name} is not available here")
        model, hardware, server = shape
        bound = cost_model.bind(resolve_model(model), hardware, server)
        assert isinstance(bound, StepCostModel)
        return bound

    def test_steps_are_positive_and_finite(self, step: StepCostModel) -> None:
        values = [step.decode_seconds(1, 0), step.decode_seconds(512, 512 * 8000), step.prefill_seconds(1, 0, 1),
                  step.prefill_seconds(32768, 100000, 4), step.mixed_seconds(4096, 0, 1, 32, 32 * 2000),
                  step.speculative_step_seconds(16, 16 * 2000, 6, 5, 8)]
        assert all(0 < v < 60 and math.isfinite(v) for v in values), values

    @pytest.mark.parametrize("per_request", [200, 2500, 30000])
    def test_decode_grows_with_the_batch(self, step: StepCostModel, per_request: int) -> None:
        times = [step.decode_seconds(b, b * per_request) for b in (1, 2, 4, 8, 16, 25, 32, 64, 128, 256, 512)]
        assert _rising(times, self.noise), times

    @pytest.mark.parametrize("batch", [1, 25, 256])
    def test_decode_grows_with_the_context(self, step: StepCostModel, batch: int) -> None:
        times = [step.decode_seconds(batch, batch * c) for c in (0, 100, 1000, 2500, 10000, 28000, 100000)]
        assert _rising(times, self.noise), times

    @pytest.mark.parametrize("cached", [0, 3000, 20000])
    def test_prefill_grows_with_new_tokens(self, step: StepCostModel, cached: int) -> None:
        times = [step.prefill_seconds(n, cached, 1) for n in (1, 30, 256, 1024, 2048, 4096, 8192, 16384, 32768)]
        assert _rising(times, self.noise), times

    def test_fallbacks_are_counted_never_more_than_the_steps_asked(self, step: StepCostModel) -> None:
        before = step.fallback_steps()
        for batch in (3, 30, 300):
            step.decode_seconds(batch, batch * 1500)
            step.prefill_seconds(batch * 10, 0, 1)
        counted = step.fallback_steps() - before
        assert isinstance(counted, int) and 0 <= counted <= 6

    def test_generation_never_beats_the_models_own_bound(self, step: StepCostModel) -> None:
        bound = step.bound_tokens_per_second()
        for batch in (1, 64, 1024):
            assert batch / step.decode_seconds(batch, batch * 500) <= bound

    def test_provenance_names_what_answered(self, step: StepCostModel) -> None:
        assert step.describe()
        assert 0.0 <= step.expert_share(32, 32 * 1000) <= 1.0
