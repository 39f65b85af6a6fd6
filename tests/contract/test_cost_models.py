"""The cost-model contract, run against every registered cost model."""

from __future__ import annotations

import math

import pytest

from service import CostModel, Hardware, ServerConfig, StepCostModel, resolve_model
from service.plugin_host import PluginHost

HOST = PluginHost(allow={"builtin_cost_models"})
# Measured kernel tables carry noise of a fraction of a percent; "monotonic" means within 1%.
NOISE = 0.99
COST_MODELS = sorted(HOST.components("cost_model"))
SHAPES = {
    "dense-tp8": ("Qwen/Qwen3.6-27B", Hardware(gpu="H200-SXM"),
                  ServerConfig(tp_size=8, quantization="fp8", kv_cache_dtype="fp8_e5m2")),
    "moe-tp2": ("Qwen/Qwen3.6-35B-A3B", Hardware(gpu="H100-SXM"), ServerConfig(tp_size=2)),
}


@pytest.fixture(scope="module", params=[(c, s) for c in COST_MODELS for s in SHAPES], ids=lambda p: f"{p[0]}-{p[1]}")
def step(request: pytest.FixtureRequest) -> StepCostModel:
    cost_model: CostModel = HOST.get("cost_model", request.param[0])
    if not cost_model.available():
        pytest.skip(f"{cost_model.name} is not available here")
    model, hardware, server = SHAPES[request.param[1]]
    return cost_model.bind(resolve_model(model), hardware, server)


def test_builtins_are_registered_and_roofline_is_always_available() -> None:
    assert {"roofline", "aiconfigurator"} <= set(COST_MODELS)
    assert HOST.get("cost_model", "roofline").available()


def test_steps_are_positive_and_finite(step: StepCostModel) -> None:
    values = [step.decode_seconds(1, 0), step.decode_seconds(512, 512 * 8000), step.prefill_seconds(1, 0, 1),
              step.prefill_seconds(32768, 100000, 4), step.mixed_seconds(4096, 0, 1, 32, 32 * 2000),
              step.speculative_step_seconds(16, 16 * 2000, 6, 5, 8)]
    assert all(0 < v < 60 and math.isfinite(v) for v in values)


@pytest.mark.parametrize("per_request", [200, 2500, 30000])
def test_decode_is_monotonic_in_batch(step: StepCostModel, per_request: int) -> None:
    times = [step.decode_seconds(b, b * per_request) for b in (1, 2, 4, 8, 16, 25, 32, 64, 128, 256, 512)]
    assert all(later >= earlier * NOISE for earlier, later in zip(times, times[1:], strict=False)), times


@pytest.mark.parametrize("batch", [1, 25, 256])
def test_decode_is_monotonic_in_context(step: StepCostModel, batch: int) -> None:
    times = [step.decode_seconds(batch, batch * c) for c in (0, 100, 1000, 2500, 10000, 28000, 100000)]
    assert all(later >= earlier * NOISE for earlier, later in zip(times, times[1:], strict=False)), times


@pytest.mark.parametrize("cached", [0, 3000, 20000])
def test_prefill_is_monotonic_in_new_tokens(step: StepCostModel, cached: int) -> None:
    times = [step.prefill_seconds(n, cached, 1) for n in (1, 30, 256, 1024, 2048, 4096, 8192, 16384, 32768)]
    assert all(later >= earlier * NOISE for earlier, later in zip(times, times[1:], strict=False)), times


def test_fallbacks_are_counted_never_more_than_the_steps_asked(step: StepCostModel) -> None:
    before = step.fallback_steps()
    for batch in (3, 30, 300):
        step.decode_seconds(batch, batch * 1500)
        step.prefill_seconds(batch * 10, 0, 1)
    counted = step.fallback_steps() - before
    assert isinstance(counted, int) and 0 <= counted <= 6


def test_generation_never_beats_the_models_own_bound(step: StepCostModel) -> None:
    bound = step.bound_tokens_per_second()
    for batch in (1, 64, 1024):
        assert batch / step.decode_seconds(batch, batch * 500) <= bound


def test_provenance_names_what_answered(step: StepCostModel) -> None:
    assert step.describe()
    assert 0.0 <= step.expert_share(32, 32 * 1000) <= 1.0
