"""Both cost models against step times measured on a real H200 (tests/data/h200/README.md).

A Qwen3.6-27B-shaped decoder at TP1, BF16: every decode step within 10%, every prefill within 20%. The
reference ran PyTorch kernels under CUDA graphs, not SGLang's, so the tolerance is for physics (bytes read,
FLOPs, achieved rates), not for SGLang's exact kernels.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plugins.cost_models.aiconfigurator import AiconfiguratorCostModel
from plugins.cost_models.roofline import RooflineCostModel
from service import CostModel, Hardware, ServerConfig, StepCostModel, resolve_model

MEASURED = json.loads((Path(__file__).parents[2] / "data" / "h200" / "qwen27b_steps.h200.json").read_text())
H200 = Hardware(gpu="H200-SXM")
DECODE_TOLERANCE = 0.10
PREFILL_TOLERANCE = 0.20


def cost_models() -> list[object]:
    aic = AiconfiguratorCostModel()
    skip = pytest.mark.skipif(not aic.available(), reason="aiconfigurator-core is not installed (pip install '.[aic]')")
    return [pytest.param(RooflineCostModel(), id="roofline"), pytest.param(aic, id="aiconfigurator", marks=skip)]


def seconds(step: StepCostModel, key: str) -> float:
    """The cost model's answer for one measured step, asked the way the simulator asks it."""
    kind, *rest = key.split()
    if kind == "decode":
        batch = int(rest[0].removeprefix("b="))
        per_request = int(rest[1].removeprefix("ctx="))
        return step.decode_seconds(batch, batch * per_request)
    return step.prefill_seconds(int(rest[0]), 0, 1)


@pytest.fixture(scope="module")
def qwen27():
    model = resolve_model("Qwen/Qwen3.6-27B")
    assert (model.num_layers, model.hidden_size, model.num_attention_heads, model.num_kv_heads, model.head_dim,
            model.intermediate_size, model.vocab_size) == (48, 5120, 64, 8, 128, 25600, 151936)
    return model


@pytest.mark.parametrize("cost_model", cost_models())
@pytest.mark.parametrize("key", sorted(MEASURED["bf16"]))
def test_bf16_steps_match_the_measured_h200(cost_model: CostModel, key: str, qwen27) -> None:
    step = cost_model.bind(qwen27, H200, ServerConfig(tp_size=1))
    measured = MEASURED["bf16"][key] / 1e3
    tolerance = DECODE_TOLERANCE if key.startswith("decode") else PREFILL_TOLERANCE
    assert seconds(step, key) == pytest.approx(measured, rel=tolerance), step.describe()
    assert step.fallback_steps() == 0


def test_the_measured_knee_is_where_the_roofline_turns_compute_bound() -> None:
    # The gate/up GEMM alone: flat while it reads its weights, linear in tokens once compute-bound.
    gemm = {int(m): ms for m, ms in MEASURED["gateup_gemm_bf16_ms_by_M"].items()}
    assert gemm[128] < 1.1 * gemm[1]
    assert gemm[2048] / gemm[1024] == pytest.approx(2.0, rel=0.1)
    step = RooflineCostModel().bind(resolve_model("Qwen/Qwen3.6-27B"), H200, ServerConfig(tp_size=1))
    assert 128 < step.threshold_batch_size() < 256
