"""aiconfigurator-core answers case-1 shapes from measured data and falls back, counted, where it has none."""

from __future__ import annotations

import random

import pytest

from plugins.cost_models.aiconfigurator import AiconfiguratorCostModel, AiconfiguratorStep
from plugins.cost_models.roofline import CasebookClockCostModel, RooflineCostModel
from service import Hardware, ServerConfig, resolve_model

pytestmark = pytest.mark.skipif(not AiconfiguratorCostModel().available(),
                                reason="aiconfigurator-core is not installed (pip install '.[aic]')")

FP8 = {"quantization": "fp8", "kv_cache_dtype": "fp8_e5m2"}
H200 = Hardware(gpu="H200-SXM")
CONTEXT = 2500


@pytest.fixture(scope="module")
def qwen27():
    return resolve_model("Qwen/Qwen3.6-27B")


@pytest.fixture(scope="module")
def tp8(qwen27) -> AiconfiguratorStep:
    return AiconfiguratorCostModel().bind(qwen27, H200, ServerConfig(tp_size=8, **FP8))


@pytest.fixture(scope="module")
def tp2(qwen27) -> AiconfiguratorStep:
    return AiconfiguratorCostModel().bind(qwen27, H200, ServerConfig(tp_size=2, **FP8))


def test_case1_shapes_are_answered_from_measured_data(tp8: AiconfiguratorStep, tp2: AiconfiguratorStep) -> None:
    for step in (tp8, tp2):
        assert step.engine is not None, step.describe()
        decode = step.decode_seconds(25, 25 * CONTEXT)
        prefill = step.prefill_seconds(4096, 0, 1)
        assert 0.001 < decode < 0.020
        assert 0.010 < prefill < 0.500
        assert step.fallback_steps() == 0
        assert "measured" in step.describe()


def test_tp2_decodes_slower_than_tp8_but_more_per_gpu(tp8: AiconfiguratorStep, tp2: AiconfiguratorStep) -> None:
    t8, t2 = tp8.decode_seconds(25, 25 * CONTEXT), tp2.decode_seconds(25, 25 * CONTEXT)
    assert t2 > t8
    assert 25 / (2 * t2) > 25 / (8 * t8)


def test_steps_grow_with_context_and_prefix_cache_hits_save_time(tp8: AiconfiguratorStep) -> None:
    assert tp8.decode_seconds(25, 25 * 20000) > tp8.decode_seconds(25, 25 * 2000)
    assert tp8.prefill_seconds(100, 20000, 1) < tp8.prefill_seconds(20100, 0, 1)


def test_memoisation_keeps_a_round_to_a_few_thousand_engine_calls(qwen27) -> None:
    step = AiconfiguratorCostModel().bind(qwen27, H200, ServerConfig(tp_size=8, **FP8))
    rng = random.Random(7)
    for _ in range(20000):  # a case-1 round: batches up to 25, contexts from 200 to 30,000 tokens
        batch = rng.randint(1, 25)
        step.decode_seconds(batch, sum(rng.randint(200, 30000) for _ in range(batch)))
    for _ in range(500):
        step.prefill_seconds(rng.randint(1, 4096), rng.choice([0, 3000, rng.randint(0, 24000)]), 1)
    assert step.engine_calls < 3000


def test_missing_perf_data_falls_back_to_the_roofline_and_is_counted(qwen27) -> None:
    # FP8 KV with BF16 attention at TP2: aiconfigurator-core has no context-attention data for it.
    step = AiconfiguratorCostModel(fmha_quant="bfloat16").bind(qwen27, H200, ServerConfig(tp_size=2, **FP8))
    seconds = [step.prefill_seconds(2048, 0, 1) for _ in range(3)]
    physical = RooflineCostModel(clock=1.0).bind(qwen27, H200, ServerConfig(tp_size=2, **FP8))
    assert seconds[0] == pytest.approx(physical.prefill_seconds(2048, 0, 1))
    assert step.fallback_steps() == 3


def test_a_gpu_without_data_answers_every_step_analytically(qwen27) -> None:
    step = AiconfiguratorCostModel().bind(qwen27, Hardware(gpu="A100-80GB"), ServerConfig(tp_size=2))
    assert step.decode_seconds(8, 8 * CONTEXT) > 0
    assert step.prefill_seconds(1024, 0, 1) > 0
    assert step.fallback_steps() == 2
    assert "A100" in step.describe()


def test_casebook_clock_ratio_is_exposed_not_hidden(tp8: AiconfiguratorStep, qwen27) -> None:
    roofline = CasebookClockCostModel().bind(qwen27, H200, ServerConfig(tp_size=8, **FP8))
    ratio = roofline.decode_seconds(25, 25 * CONTEXT) / tp8.decode_seconds(25, 25 * CONTEXT)
    assert 2.0 < ratio < 10.0  # the casebook's simulated clock runs several times slower than measured kernels


def test_online_fp8_without_measured_fp8_data_is_never_priced_as_bf16() -> None:
    # GLM-4.5-Air is answered through the bundled Qwen3-30B-A3B (aiconfigurator-core has no Glm4Moe graph),
    # whose 768-wide experts fit no 128-wide FP8 block at MoE TP4: no FP8 rows. Its BF16 rows once answered
    # the FP8 server too ("the checkpoint's quant modes", meant for FP8 checkpoints), so FP8 measured exactly
    # as BF16 and was rolled back as "nothing changed". The BF16 server's measured steps are now scaled by the
    # roofline's FP8-over-BF16 ratio, and describe() says so.
    air = resolve_model("zai-org/GLM-4.5-Air")
    h100 = Hardware(gpu="H100-SXM", gpus_per_node=4)
    bf16 = AiconfiguratorCostModel().bind(air, h100, ServerConfig(tp_size=4))
    fp8 = AiconfiguratorCostModel().bind(air, h100, ServerConfig(tp_size=4, **FP8))
    assert fp8.twin is not None and fp8.engine is not None and fp8.twin.shape.server.weight_dtype == "bf16"
    assert "its BF16 server's (no measured data for its FP8 weights or KV) scaled by the roofline's ratio" in (
        fp8.describe())
    roof_bf16 = RooflineCostModel(clock=1.0).bind(air, h100, ServerConfig(tp_size=4))
    roof_fp8 = RooflineCostModel(clock=1.0).bind(air, h100, ServerConfig(tp_size=4, **FP8))
    for batch in (8, 64):
        ratio = fp8.decode_seconds(batch, batch * 2048) / bf16.decode_seconds(batch, batch * 2048)
        physical = roof_fp8.decode_seconds(batch, batch * 2048) / roof_bf16.decode_seconds(batch, batch * 2048)
        assert ratio == pytest.approx(physical, rel=1e-9) and ratio < 0.8
    assert fp8.prefill_seconds(4096, 0, 1) < bf16.prefill_seconds(4096, 0, 1)
    # A checkpoint stored in FP8 keeps its own quant modes (DeepSeek-V4-Flash), with no twin.
    flash = AiconfiguratorCostModel().bind(resolve_model("deepseek-ai/DeepSeek-V4-Flash"), Hardware(gpu="H200-SXM"),
                                           ServerConfig(tp_size=8, **FP8))
    assert flash.twin is None


def test_a_bundled_stand_in_is_scaled_to_the_model_it_stands_in_for() -> None:
    # GLM-4.5-Air (106B, 12B active) is measured through the bundled Qwen3-30B-A3B (30B, 3B active): its raw
    # rows put a 64-request decode step at 8.9 ms on four H100s, a third of what the larger model streams and
    # computes. Each measured step is scaled by the roofline's ratio between the model and its stand-in.
    air = resolve_model("zai-org/GLM-4.5-Air")
    h100 = Hardware(gpu="H100-SXM", gpus_per_node=4)
    step = AiconfiguratorCostModel().bind(air, h100, ServerConfig(tp_size=4))
    assert step.twin is not None and step.twin.shape.model.name == "Qwen/Qwen3-30B-A3B"
    assert "Qwen/Qwen3-30B-A3B's measured steps scaled by the roofline's ratio for each step" in step.describe()
    raw = step.engine.decode_step_latency(64, 2048, 0) / 1e3
    scaled = step.decode_seconds(64, 64 * 2048)
    ratio = (step.fallback.decode_seconds(64, 64 * 2048) / step.twin.decode_seconds(64, 64 * 2048))
    assert ratio > 2 and scaled == pytest.approx(raw * ratio, rel=0.05)
    # A model with its own measured config has no stand-in and no scaling.
    assert AiconfiguratorCostModel().bind(resolve_model("Qwen/Qwen3.6-27B"), H200, ServerConfig(tp_size=8)).twin is None
