"""Scheduler details from SGLang 0.5.23 that move figures: DP-attention budgets, document lengths,
HiCache restores, and the running batch's uniform decode steps."""

from __future__ import annotations

import numpy as np

from service.domain import Hardware, LengthDist, PrefixStructure, ServerConfig, resolve_model
from service.domain.workload import DocumentSet
from service.simulator.batch import RunningBatch
from service.simulator.cluster import Pool, transfer_seconds
from service.simulator.memory import resolve_server
from service.simulator.requests import MIN_UNIQUE_TAIL, SimRequest, document_lengths, layout_blocks
from service.simulator.router import Router


def test_dp_attention_divides_the_chunk_per_rank_and_schedules_less_conservatively() -> None:
    model = resolve_model("deepseek-ai/DeepSeek-V4-Flash")
    hardware = Hardware(gpu="H200-SXM", gpus_per_node=8, nodes=4)
    base = {"tp_size": 32, "ep_size": 32, "quantization": "fp8", "chunked_prefill_size": 8192}
    tp = resolve_server(model, hardware, ServerConfig(**base))
    dp = resolve_server(model, hardware, ServerConfig(**base, attention_dp_size=8))
    assert (tp.chunked_prefill_size, dp.chunked_prefill_size) == (8192, 1024)
    assert dp.schedule_conservativeness == 0.3 * tp.schedule_conservativeness


def test_document_prompts_vary_by_document_and_end_in_a_short_question() -> None:
    prefix = PrefixStructure(system_prompt_tokens=500, documents=DocumentSet(count=1000, tokens=20000, popular=50,
                                                                             popular_share=0.8))
    lengths = document_lengths(prefix, LengthDist(median=20530, p95=24800), cap=200_000)
    assert lengths is not None and abs(lengths.mean() - 20000) < 0.02 * 20000
    assert np.percentile(lengths, 95) > 1.1 * np.median(lengths)
    doc = int(np.argmax(lengths))
    blocks = layout_blocks(prefix, 500 + int(lengths[doc]) + MIN_UNIQUE_TAIL, 1, doc, -1, int(lengths[doc]))
    assert blocks[-1][1] == MIN_UNIQUE_TAIL and blocks[1][1] == lengths[doc]
    assert np.array_equal(lengths, document_lengths(prefix, LengthDist(median=20530, p95=24800), cap=200_000))


def _request(rid: int, output: int) -> SimRequest:
    return SimRequest(rid=rid, blocks=((rid, 100),), input_len=100, output_len=output, max_new_tokens=output,
                      generated=1)


def test_uniform_decode_steps_finish_requests_as_per_token_steps_do() -> None:
    uniform, per_token = RunningBatch(8), RunningBatch(8)
    outputs = [3, 7, 2, 5, 9]
    for i, out in enumerate(outputs):
        uniform.add(_request(i, out))
        per_token.add(_request(i, out))
    finished_u, finished_p = [], []
    for _ in range(10):
        for slot in uniform.advance_one():
            finished_u.append(slot)
            uniform.remove(uniform.reqs[slot])  # type: ignore[arg-type]
        for slot in per_token.advance(np.ones(per_token.size, dtype=np.int64)):
            finished_p.append(int(slot))
            per_token.remove(per_token.reqs[int(slot)])  # type: ignore[arg-type]
        assert uniform.ctx_sum == per_token.ctx_sum
    assert finished_u == finished_p and len(finished_u) == len(outputs)


def _prefill_pool(backend: str | None) -> tuple[Pool, Hardware]:
    model = resolve_model("Qwen/Qwen3.6-27B")
    hardware = Hardware(gpu="H200-SXM", gpus_per_node=8, nodes=1)
    server = ServerConfig(tp_size=2, disaggregation_transfer_backend=backend)
    return Pool(role="prefill", workers=[], router=Router("round_robin", 1, None, np.random.default_rng(0)),
                grammar=[], resolved=resolve_server(model, hardware, server), server=server, replicas=1,
                balance=None), hardware


def test_pd_kv_transfer_takes_the_nic_under_mooncake_and_nvlink_under_nixl_inside_one_node() -> None:
    # Mooncake's default protocol is RDMA (mooncake_transfer_engine.py MOONCAKE_PROTOCOL), through each GPU's
    # NIC even between two GPUs of one node; NIXL's UCX uses NVLink there. 28,000 prompt tokens of BF16 KV.
    (mooncake, hardware), (nixl, _), (fake, _) = (_prefill_pool(b) for b in (None, "nixl", "fake"))
    per_gpu_bytes = 28_000 * mooncake.resolved.kv_bytes_per_gpu_token
    assert transfer_seconds(28_000, mooncake, hardware) == 0.001 + per_gpu_bytes / (hardware.interconnect_gbps * 1e9)
    assert transfer_seconds(28_000, nixl, hardware) == 0.001 + per_gpu_bytes / (hardware.spec.nvlink_gbps * 1e9)
    assert transfer_seconds(28_000, fake, hardware) == 0.0
