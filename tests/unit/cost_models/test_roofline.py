"""The roofline reproduces the casebook's threshold batch, its case-1 magnitudes and its directions."""

from __future__ import annotations

import pytest

from plugins.cost_models.roofline import CASEBOOK_CLOCK, CasebookClockCostModel, RooflineCostModel, RooflineStep
from service import Hardware, ServerConfig, resolve_model

FP8 = {"quantization": "fp8", "kv_cache_dtype": "fp8_e5m2"}
H200 = Hardware(gpu="H200-SXM")
H100 = Hardware(gpu="H100-SXM")
CONTEXT = 2500  # case 1 round 0: ~2,100-token prompts plus the tokens generated so far


def bind(model: str = "Qwen/Qwen3.6-27B", hardware: Hardware = H200, **server: object) -> RooflineStep:
    return RooflineCostModel().bind(resolve_model(model), hardware, ServerConfig(**server))


def casebook_bind(model: str = "Qwen/Qwen3.6-27B", hardware: Hardware = H200, **server: object) -> RooflineStep:
    """The same roofline on the casebook's clock, to compare with its printed figures."""
    return CasebookClockCostModel().bind(resolve_model(model), hardware, ServerConfig(**server))


@pytest.mark.parametrize(("hardware", "expected"), [(H200, 206), (H100, 295)])
def test_threshold_batch_is_the_casebooks(hardware: Hardware, expected: int) -> None:
    step = bind(hardware=hardware, tp_size=8)
    assert step.threshold_batch_size() == pytest.approx(expected, abs=1.5)


@pytest.mark.parametrize("hardware", [H200, H100])
def test_decode_turns_compute_bound_past_the_threshold_batch(hardware: Hardware) -> None:
    step = bind(hardware=hardware, tp_size=8, cuda_graph_max_bs=4096)
    threshold = step.threshold_batch_size()
    below = step.decode_physical(int(threshold / 2), 0) / step.decode_physical(int(threshold / 4), 0)
    above = step.decode_physical(int(threshold * 4), 0) / step.decode_physical(int(threshold * 2), 0)
    assert below < 1.25  # memory-bound: twice the batch costs little more
    assert above > 1.6  # compute-bound: twice the batch costs nearly twice the time


def test_case1_round0_decode_lands_near_the_casebooks_itl() -> None:
    bf16 = casebook_bind(tp_size=8).decode_seconds(25, 25 * CONTEXT)
    assert 0.024 < bf16 < 0.033  # casebook: median ITL 28.41 ms
    assert 0.002 < bind(tp_size=8).decode_seconds(25, 25 * CONTEXT) < 0.005  # the physical clock


def test_fp8_weights_and_kv_speed_up_decode_and_prefill() -> None:
    bf16, fp8 = casebook_bind(tp_size=8), casebook_bind(tp_size=8, **FP8)
    assert 0.018 < fp8.decode_seconds(25, 25 * CONTEXT) < 0.024  # casebook round 2: 21.08 ms
    assert fp8.decode_seconds(25, 25 * CONTEXT) < 0.8 * bf16.decode_seconds(25, 25 * CONTEXT)
    assert fp8.prefill_seconds(4096, 0, 1) < 0.8 * bf16.prefill_seconds(4096, 0, 1)


def test_fp8_without_fp8_tensor_cores_only_saves_bytes() -> None:
    a100 = Hardware(gpu="A100-80GB")
    bf16, fp8 = bind(hardware=a100, tp_size=2), bind(hardware=a100, tp_size=2, **FP8)
    # Prefill is compute-bound: no FP8 math on A100, so it barely changes; decode still reads half the bytes.
    assert fp8.prefill_seconds(8192, 0, 1) > 0.9 * bf16.prefill_seconds(8192, 0, 1)
    assert fp8.decode_seconds(8, 8 * CONTEXT) < 0.7 * bf16.decode_seconds(8, 8 * CONTEXT)


def test_tp2_is_slower_per_token_but_better_per_gpu_than_tp8() -> None:
    tp8, tp2 = bind(tp_size=8, **FP8), bind(tp_size=2, **FP8)
    batch = 25
    t8, t2 = tp8.decode_seconds(batch, batch * CONTEXT), tp2.decode_seconds(batch, batch * CONTEXT)
    assert t2 > t8
    assert batch / (2 * t2) > batch / (8 * t8)  # tokens per second per GPU
    # Prefill too: TP8 spends a larger share on all-reduce, so four TP2 replicas outrun one TP8.
    assert 4 / tp2.prefill_seconds(4096, 0, 1) > 1 / tp8.prefill_seconds(4096, 0, 1)


def chunked_prefill_seconds(step: RooflineStep, prompt: int, chunk: int) -> float:
    done, total = 0, 0.0
    while done < prompt:
        size = min(chunk, prompt - done)
        total += step.prefill_seconds(size, done, 1)
        done += size
    return total


def test_smaller_prefill_chunks_cost_more_gpu_time() -> None:
    step = bind(tp_size=8)
    whole = chunked_prefill_seconds(step, 28000, 28000)
    c4096 = chunked_prefill_seconds(step, 28000, 4096)
    c2048 = chunked_prefill_seconds(step, 28000, 2048)
    assert whole < c4096 < c2048
    assert c4096 / whole < 1.15  # a few percent to ~10%: the casebook's "slightly reducing GPU efficiency"
    assert c2048 - c4096 > 0.5 * (c4096 - whole)


def test_mixed_chunk_reads_weights_once() -> None:
    step = bind(tp_size=8)
    mixed = step.mixed_seconds(2048, 0, 1, 25, 25 * CONTEXT)
    assert step.prefill_seconds(2048, 0, 1) < mixed
    assert mixed < step.prefill_seconds(2048, 0, 1) + step.decode_seconds(25, 25 * CONTEXT)


def test_speculative_gain_falls_as_concurrency_rises() -> None:
    step = bind(tp_size=8, **FP8)
    accept_length = 3.82  # casebook case 1 round 3

    def gain(batch: int) -> float:
        spec = step.speculative_step_seconds(batch, batch * CONTEXT, draft_tokens=6, draft_steps=5, topk=8)
        return accept_length * step.decode_seconds(batch, batch * CONTEXT) / spec

    gains = [gain(b) for b in (8, 25, 64, 128, 512)]
    assert gains[0] > 1.5
    assert all(later < earlier for earlier, later in zip(gains, gains[1:], strict=False))
    assert gains[-1] < 1.0  # deep in the compute-bound region drafting loses


def test_moe_decode_reports_its_expert_share_and_dense_none() -> None:
    moe = bind("deepseek-ai/DeepSeek-V4-Flash", Hardware(gpu="H200-SXM", nodes=4), tp_size=32, ep_size=32,
               attention_dp_size=8, **FP8)
    assert 0.1 < moe.expert_share(40, 40 * 3400) < 1.0
    assert bind(tp_size=8).expert_share(25, 25 * CONTEXT) == 0.0


def test_dp_attention_stops_replicating_mla_kv() -> None:
    model = "deepseek-ai/DeepSeek-V4-Flash"
    tp8 = bind(model, tp_size=8, **FP8)
    dp8 = bind(model, tp_size=8, ep_size=8, attention_dp_size=8, **FP8)
    # Same 8 GPUs, same requests: under TP every GPU reads all of the latent KV, under DP attention an eighth.
    assert dp8.shape.kv_bytes_read(80 * 3400, 80) / 8 < tp8.shape.kv_bytes_read(80 * 3400, 80) / 7


def test_throughput_bound_is_never_beaten_and_the_clock_scales_every_step() -> None:
    step = bind(tp_size=8, **FP8)
    for batch in (1, 64, 512, 4096):
        assert batch / step.decode_seconds(batch, batch * 100) < step.bound_tokens_per_second()
    physical = RooflineCostModel(clock=1.0).bind(resolve_model("Qwen/Qwen3.6-27B"), H200, ServerConfig(tp_size=8))
    assert casebook_bind(tp_size=8).decode_seconds(25, 25 * CONTEXT) == pytest.approx(
        CASEBOOK_CLOCK * physical.decode_seconds(25, 25 * CONTEXT))
    assert bind(tp_size=8).decode_seconds(25, 25 * CONTEXT) == physical.decode_seconds(25, 25 * CONTEXT)
    assert physical.transfer_seconds(1.92e9, 64) == pytest.approx(0.030, rel=0.01)  # casebook case 2 HiCache
