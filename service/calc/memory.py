"""KV cache and weight memory (casebook "Capacity Calculation" sections of cases 1 and 2).

All memory figures are in the casebook's units (see `service.calc.units`): KB = 1,024 bytes,
GB = 10^6 KB.
"""

from __future__ import annotations

import math

import msgspec

from service.calc.bounds import (
    GIGABYTES,
    KV_BYTES,
    PARAMS,
    POOL_GIGABYTES,
    POSITIVE_COUNT,
    RATIO,
    REQUESTS,
    ROPE_WIDTH,
    TOKENS,
    WIDTH,
    check,
)
from service.calc.units import GB
from service.domain.model import ModelSpec, dtype_bytes


def kv_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int, kv_dtype: str = "bf16") -> int:
    """KV cache bytes per token of a GQA/MHA model.

    Casebook case 1: "KV per token (BF16) = 2 × 48 × 8 × 128 × 2 bytes = 196,608 bytes ≈ 192 KB"
    (the 2 is one key and one value vector per layer and KV head).

    Args:
        num_layers: Layers that keep a KV cache.
        num_kv_heads: Key/value heads per layer.
        head_dim: Dimension of one head.
        kv_dtype: KV cache dtype (`bf16`, `fp8_e5m2`, ...), as `--kv-cache-dtype` names it.

    Returns:
        Bytes per token across all layers.

    Raises:
        CalcInputError: a count or width below 1 (or absurdly large).
    """
    check("num_layers", num_layers, POSITIVE_COUNT)
    check("num_kv_heads", num_kv_heads, POSITIVE_COUNT)
    check("head_dim", head_dim, WIDTH)
    return int(2 * num_layers * num_kv_heads * head_dim * dtype_bytes(kv_dtype))


def mla_kv_bytes_per_token(num_layers: int, kv_lora_rank: int, qk_rope_head_dim: int,
                           kv_dtype: str = "bf16") -> int:
    """KV cache bytes per token of an MLA model (DeepSeek-style latent attention).

    MLA caches one compressed latent (`kv_lora_rank`) plus the decoupled rope key (`qk_rope_head_dim`) per
    layer instead of per-head keys and values (SGLang `srt/mem_cache/memory_pool.py`, MLATokenToKVPool).

    Args:
        num_layers: Layers that keep a KV cache.
        kv_lora_rank: Width of the compressed KV latent.
        qk_rope_head_dim: Width of the rope part of the key.
        kv_dtype: KV cache dtype.

    Returns:
        Bytes per token across all layers.

    Raises:
        CalcInputError: a count or width out of range.
    """
    check("num_layers", num_layers, POSITIVE_COUNT)
    check("kv_lora_rank", kv_lora_rank, WIDTH)
    check("qk_rope_head_dim", qk_rope_head_dim, ROPE_WIDTH)
    return int(num_layers * (kv_lora_rank + qk_rope_head_dim) * dtype_bytes(kv_dtype))


def model_kv_bytes_per_token(model: ModelSpec, kv_dtype: str = "bf16") -> int:
    """KV cache bytes a token costs in SGLang's pool for a model spec (GQA, MLA, the full-attention layers of a
    hybrid linear model; sliding-window layers at SGLang's 0.8 SWA share, as its hybrid SWA pool sizes them)."""
    return model.kv_bytes_per_token(kv_dtype)


def kv_memory_gb(bytes_per_token: int, tokens: int, requests: int = 1) -> float:
    """KV memory held by `requests` concurrent requests of `tokens` context each, in casebook GB.

    Casebook case 1: "3,000 × 192 KB × 25 ≈ 14.4 GB" and "28,000 × 192 KB × 25 ≈ 134 GB".

    Raises:
        CalcInputError: a size that is not positive (or absurdly large).
    """
    check("bytes_per_token", bytes_per_token, KV_BYTES)
    check("tokens", tokens, TOKENS)
    check("requests", requests, REQUESTS)
    return bytes_per_token * tokens * requests / GB


def weight_memory_gb(params: float, weight_dtype: str = "bf16") -> float:
    """Weight memory in GB as model cards state it: parameters × bytes per parameter / 10^9.

    Casebook case 1: Qwen3.6-27B is "54GB (BF16)" and "27GB (FP8)".

    Raises:
        CalcInputError: a parameter count that is not positive.
    """
    check("params", params, PARAMS)
    return params * dtype_bytes(weight_dtype) / 1e9


class KvCapacity(msgspec.Struct, frozen=True, kw_only=True):
    """How much KV cache fits: tokens, documents, and the HiCache host tier on top."""

    gpu_memory_gb: float
    weights_gb: float
    headroom_gb: float
    kv_available_gb: float
    kv_bytes_per_token: int
    kv_tokens: int
    document_tokens: int | None = None
    document_gb: float | None = None
    documents: int | None = None
    host_pool_gb: float = 0.0
    host_tokens: int = 0
    host_documents: int | None = None
    total_tokens: int = 0
    total_documents: int | None = None


def kv_capacity(gpu_memory_gb: float, weights_gb: float, headroom_gb: float, bytes_per_token: int, *,
                document_tokens: int | None = None, hicache_ratio: float | None = None,
                hicache_size_gb: float | None = None, ranks: int = 1) -> KvCapacity:
    """KV capacity left after weights and activation headroom, in tokens and in documents.

    Casebook case 2: "4xH100 = 320GB, weights 27GB, activations/buffer headroom 35GB, KV available 258GB;
    258 GB ÷ (20,000 × 96 KB = 1.92 GB) ≈ 134 types". With HiCache the host pool is layered on top of the
    GPU pool: `--hicache-ratio 2` gives a 516 GB host pool holding 268 more documents, 402 in all;
    `--hicache-size` (GB on each GPU rank, SGLang's reading) overrides the ratio. Documents are counted per tier (a tier holds whole documents).

    Args:
        gpu_memory_gb: HBM of all GPUs serving one copy of the model (GPU memory × count).
        weights_gb: Weight memory (see `weight_memory_gb`).
        headroom_gb: Activations, CUDA graphs and buffers kept out of the KV pool.
        bytes_per_token: KV bytes per token.
        document_tokens: Length of one cached document, to count documents.
        hicache_ratio: Host pool size as a multiple of the GPU KV pool (`--hicache-ratio`).
        hicache_size_gb: Host pool size in GB per GPU rank (`--hicache-size`); overrides the ratio.
        ranks: GPUs in `gpu_memory_gb`, each with its own `--hicache-size` host pool.

    Returns:
        The capacity breakdown.

    Raises:
        CalcInputError: A size out of its range (`service.calc.bounds`), naming the argument.
        ValueError: When weights and headroom leave no room for KV cache.
    """
    _check_capacity_inputs(gpu_memory_gb, weights_gb, headroom_gb, bytes_per_token, document_tokens)
    available = gpu_memory_gb - weights_gb - headroom_gb
    if available <= 0:
        raise ValueError(f"no KV cache room: {gpu_memory_gb:g} GB - {weights_gb:g} GB weights "
                         f"- {headroom_gb:g} GB headroom = {available:g} GB")
    host_gb = _host_pool_gb(available, hicache_ratio, hicache_size_gb, ranks)
    kv_tokens = math.floor(available * GB / bytes_per_token)
    host_tokens = math.floor(host_gb * GB / bytes_per_token)
    documents = host_documents = total_documents = document_gb = None
    if document_tokens is not None:
        document_gb = document_tokens * bytes_per_token / GB
        documents = kv_tokens // document_tokens
        host_documents = host_tokens // document_tokens
        total_documents = documents + host_documents
    return KvCapacity(
        gpu_memory_gb=gpu_memory_gb, weights_gb=weights_gb, headroom_gb=headroom_gb, kv_available_gb=available,
        kv_bytes_per_token=bytes_per_token, kv_tokens=kv_tokens, document_tokens=document_tokens,
        document_gb=document_gb, documents=documents, host_pool_gb=host_gb, host_tokens=host_tokens,
        host_documents=host_documents, total_tokens=kv_tokens + host_tokens, total_documents=total_documents,
    )


def _check_capacity_inputs(gpu_memory_gb: float, weights_gb: float, headroom_gb: float, bytes_per_token: int,
                           document_tokens: int | None) -> None:
    check("gpu_memory_gb", gpu_memory_gb, POOL_GIGABYTES)
    check("weights_gb", weights_gb, GIGABYTES)
    check("headroom_gb", headroom_gb, GIGABYTES)
    check("bytes_per_token", bytes_per_token, KV_BYTES)
    if document_tokens is not None:
        check("document_tokens", document_tokens, TOKENS)


def _host_pool_gb(kv_available_gb: float, ratio: float | None, size_gb: float | None, ranks: int) -> float:
    # SGLang `srt/mem_cache/pool_host/base.py`: hicache_size (GB per rank) wins over hicache_ratio when set.
    if size_gb is not None:
        check("hicache_size_gb", size_gb, POOL_GIGABYTES)
        return size_gb * max(ranks, 1)
    if ratio is None:
        return 0.0
    check("hicache_ratio", ratio, RATIO)
    return kv_available_gb * ratio
