"""Expert-parallel MoE layers: SGLang's gather path against DeepEP's all-to-all, and two-batch overlap."""

from __future__ import annotations

import dataclasses

import msgspec
import pytest

from plugins.cost_models.aic_engines import weight_matched_ep
from plugins.cost_models.aiconfigurator import AiconfiguratorCostModel
from plugins.cost_models.roofline import RooflineCostModel
from service import Hardware, ServerConfig, resolve_model

FOUR_NODES = Hardware(gpu="H200-SXM", gpus_per_node=8, nodes=4, interconnect="infiniband-ndr",
                      interconnect_gbps=50.0)
EP32 = {"tp_size": 32, "ep_size": 32, "attention_dp_size": 8, "quantization": "fp8", "kv_cache_dtype": "fp8_e5m2"}
PER_RANK = 44  # casebook case 5 round 1: 1,400 requests over four instances of eight DP-attention ranks
CONTEXT = PER_RANK * 3400


@pytest.fixture(scope="module")
def flash():
    return resolve_model("deepseek-ai/DeepSeek-V4-Flash")


def _servers(**extra: object) -> tuple[ServerConfig, ServerConfig]:
    return ServerConfig(**EP32), ServerConfig(**EP32, moe_a2a_backend="deepep", extra=dict(extra))


def test_roofline_deepep_beats_gathering_every_rank_tokens(flash) -> None:
    gather, deepep = (RooflineCostModel().bind(flash, FOUR_NODES, s) for s in _servers())
    assert deepep.decode_seconds(PER_RANK, CONTEXT) < 0.8 * gather.decode_seconds(PER_RANK, CONTEXT)
    assert deepep.prefill_seconds(1024, 0, 1) < 0.5 * gather.prefill_seconds(1024, 0, 1)
    assert gather.moe_alltoall_seconds(PER_RANK, prefill=False) == 0.0


def test_normal_mode_sends_a_token_once_per_node(flash) -> None:
    step = RooflineCostModel().bind(flash, FOUR_NODES, _servers()[1])
    shape = step.shape
    # Top-6 routing over four nodes reaches fewer than six remote destinations: normal mode moves fewer bytes.
    assert shape.alltoall_node_bytes(2048, nodes=4) < 0.6 * shape.alltoall_bytes(2048)
    assert step.moe_alltoall_seconds(2048, prefill=True) < step.moe_alltoall_seconds(2048, prefill=False)


def test_two_batch_overlap_hides_the_all_to_all(flash) -> None:
    plain = RooflineCostModel().bind(flash, FOUR_NODES, _servers()[1])
    overlapped = RooflineCostModel().bind(flash, FOUR_NODES, _servers(**{"--enable-two-batch-overlap": True})[1])
    a2a = plain.moe_alltoall_seconds(PER_RANK, prefill=False)
    saved = plain.decode_seconds(PER_RANK, CONTEXT) - overlapped.decode_seconds(PER_RANK, CONTEXT)
    assert 0.5 * a2a < saved <= a2a


def test_decode_rows_are_read_at_the_ep_size_of_the_same_local_expert_bytes() -> None:
    # DeepSeek-V3's own shape at EP32 (8 local experts) reads its own rows; 4.57 of its experts' bytes lie
    # between EP64 (4 local) and EP32 (8 local), nearer EP64. Past EP4's 64 local experts the streamed
    # bytes scale EP4's row; below EP256's one expert, EP256's row stands.
    assert weight_matched_ep(8.0) == ((32, 1.0),)
    (ep_a, w_a), (ep_b, w_b) = weight_matched_ep(4.0 + 0.57)
    assert (ep_a, ep_b) == (64, 32) and w_a == pytest.approx(1 - 0.57 / 4) and w_b == pytest.approx(0.57 / 4)
    assert weight_matched_ep(0.5) == ((256, 1.0),) and weight_matched_ep(128.0) == ((4, 2.0),)


@pytest.mark.skipif(not AiconfiguratorCostModel().available(), reason="aiconfigurator-core is not installed")
def test_measured_step_swaps_the_gather_for_the_all_to_all(flash) -> None:
    gather, deepep = (AiconfiguratorCostModel().bind(flash, FOUR_NODES, s) for s in _servers())
    assert deepep.alltoall and deepep.gather_dispatch_json and not gather.alltoall
    assert deepep.decode_seconds(PER_RANK, CONTEXT) < 0.6 * gather.decode_seconds(PER_RANK, CONTEXT)
    assert deepep.prefill_seconds(1024, 0, 1) < 0.5 * gather.prefill_seconds(1024, 0, 1)
    assert deepep.fallback_steps() == 0
    # Its MoE rows are collected under power-law routing: the EP step already waits for the busiest rank.
    assert deepep.includes_expert_skew() and "DeepEP" in deepep.describe()
    # Without an all-to-all backend the round says it ran SGLang's gather path; a TP-only server says neither.
    assert gather.gathered and not deepep.gathered and "gathered onto each GPU" in gather.describe()
    tp8 = AiconfiguratorCostModel().bind(flash, FOUR_NODES, ServerConfig(tp_size=8, quantization="fp8"))
    assert not tp8.gathered and "gathered" not in tp8.describe()
    # EP under TP attention: every GPU already holds all the tokens, nothing is gathered.
    ep8 = AiconfiguratorCostModel().bind(flash, FOUR_NODES, ServerConfig(tp_size=8, ep_size=8, quantization="fp8"))
    assert not ep8.gathered and "gathered" not in ep8.describe()


@pytest.mark.skipif(not AiconfiguratorCostModel().available(), reason="aiconfigurator-core is not installed")
def test_deepep_servers_price_routed_experts_on_deepgemm_rows(flash) -> None:
    # `--moe-runner-backend auto` with DeepEP runs DeepGEMM (fp8.py is_deepgemm_moe_runner_backend_enabled);
    # aiconfigurator's measured DeepEP expert rows have DeepSeek-V3's shape, so V4-Flash's tokens are scaled
    # to the same per-GPU GEMM work: top-6 x 4096 x 2048 against top-8 x 7168 x 2048.
    deepep = AiconfiguratorCostModel().bind(flash, FOUR_NODES, _servers()[1])
    swap = deepep.expert_swap
    assert swap is not None and swap.token_scale == pytest.approx(6 * 4096 / (8 * 7168))
    fused = dataclasses.replace(deepep, expert_swap=None, _memo={})
    # A 1,024-token per-rank chunk (8,192 tokens over the instance) runs faster on DeepGEMM than on the
    # fused Triton rows. A 44-request decode streams the local experts' weights on both kernels; DeepGEMM's
    # masked rows are read at V4-Flash's local expert bytes (8 experts of 4096 x 2048 weigh 4.57 of V3's).
    assert deepep.prefill_seconds(1024, 0, 1) < 0.85 * fused.prefill_seconds(1024, 0, 1)
    assert 0.8 * fused.decode_seconds(PER_RANK, CONTEXT) < deepep.decode_seconds(PER_RANK, CONTEXT) \
        < fused.decode_seconds(PER_RANK, CONTEXT)
    assert "decode at EP64 / EP32" in deepep.describe()
    assert deepep.expert_swap_misses == 0 and deepep.fallback_steps() == 0
    assert "DeepGEMM" in deepep.describe()
    bf16 = ServerConfig(**{**EP32, "quantization": None}, moe_a2a_backend="deepep")
    assert AiconfiguratorCostModel().bind(flash, FOUR_NODES, bf16).expert_swap is None


# DeepEP's published low-latency kernels (github.com/deepseek-ai/DeepEP docs/legacy.md, "Low-latency kernels
# with pure RDMA": H800, CX7 400 Gb/s, 128 tokens per batch, hidden 7168, top-8, FP8 dispatch, BF16 combine):
# dispatch + combine latency in us per EP size.
DEEPEP_LOW_LATENCY_US = {16: 118 + 195, 32: 155 + 273, 64: 173 + 314, 128: 192 + 369, 256: 194 + 360}


@pytest.mark.parametrize(("ep", "published_us"), sorted(DEEPEP_LOW_LATENCY_US.items()))
def test_decode_alltoall_matches_deepeps_published_low_latency_kernels(flash, ep: int, published_us: int) -> None:
    # DeepSeek-V3's routed-expert shape on V4-Flash's 256 experts: the published benchmark's traffic.
    v3 = msgspec.structs.replace(flash, hidden_size=7168, experts_per_token=8, moe_intermediate_size=2048)
    hardware = Hardware(gpu="H200-SXM", gpus_per_node=8, nodes=ep // 8, interconnect_gbps=50.0)
    step = RooflineCostModel().bind(v3, hardware, ServerConfig(tp_size=ep, ep_size=ep, attention_dp_size=ep,
                                                               moe_a2a_backend="deepep"))
    per_layer = step.moe_alltoall_seconds(128, prefill=False) / step.shape.moe_layers
    assert per_layer * 1e6 == pytest.approx(published_us, rel=0.10)

