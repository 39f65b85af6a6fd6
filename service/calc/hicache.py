"""HiCache break-even and page boundary waste (casebook case 2, "Round 3 - Expanding Capacity with HiCache")."""

from __future__ import annotations

import math

import msgspec

from service.calc.bounds import FRACTION, KV_BYTES, PARAMS, POSITIVE_COUNT, RATE, TOKENS, Bound, check
from service.calc.units import GB, MB


class HiCacheBreakEven(msgspec.Struct, frozen=True, kw_only=True):
    """Recomputing a cached prefix versus restoring it from host memory."""

    tokens: int
    kv_gb: float
    prefill_flop: float
    effective_tflops: float
    recompute_ms: float
    transfer_ms: float
    ratio: float
    offload_pays: bool


def hicache_break_even(tokens: int, params: float, peak_tflops: float, gpus: int, bytes_per_token: int,
                       transfer_gbps: float, efficiency: float = 0.6) -> HiCacheBreakEven:
    """Compare prefill recomputation with a host-to-GPU transfer of the same KV cache.

    Casebook case 2: "20,000 tokens × 2 × 27e9 FLOP = 1.08e15 FLOP; H100 FP8 1,979 TFLOPS × 4 GPUs × 60%
    effective = 4,750 TFLOPS → ≈ 227 ms" against "1.92 GB ÷ 64 GB/s (PCIe 5.0) ≈ 30 ms": offloading is
    7.6 times more advantageous. A ratio below 1 means HiCache is detrimental.

    Args:
        tokens: Prefix length to restore.
        params: Parameters touched per token (active parameters for MoE); prefill costs 2 FLOP each.
        peak_tflops: Peak dense TFLOP/s of one GPU in the serving dtype.
        gpus: GPUs sharing the prefill (TP size).
        bytes_per_token: KV bytes per token.
        transfer_gbps: Host-to-GPU bandwidth in casebook GB/s.
        efficiency: Fraction of peak the prefill reaches.

    Returns:
        Both times, their ratio (recompute / transfer) and whether offloading pays.

    Raises:
        CalcInputError: When a size or rate is out of its range (`service.calc.bounds`), naming it.
    """
    for field, value, bound in (("tokens", tokens, TOKENS), ("params", params, PARAMS),
                                ("peak_tflops", peak_tflops, RATE), ("gpus", gpus, POSITIVE_COUNT),
                                ("bytes_per_token", bytes_per_token, KV_BYTES), ("transfer_gbps", transfer_gbps, RATE),
                                ("efficiency", efficiency, FRACTION)):
        check(field, value, bound)
    flop = tokens * 2 * params
    effective = peak_tflops * gpus * efficiency
    recompute_s = flop / (effective * 1e12)
    kv_gb = tokens * bytes_per_token / GB
    transfer_s = kv_gb / transfer_gbps
    ratio = recompute_s / transfer_s if transfer_s > 0 else math.inf
    return HiCacheBreakEven(
        tokens=tokens, kv_gb=kv_gb, prefill_flop=flop, effective_tflops=effective,
        recompute_ms=recompute_s * 1e3, transfer_ms=transfer_s * 1e3, ratio=ratio, offload_pays=ratio > 1,
    )


class PageWaste(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens of a shared prefix lost because prefix matching works in whole pages."""

    shared_tokens: int
    page_size: int
    reusable_tokens: int
    wasted_tokens: int
    max_wasted_tokens: int
    document_tokens: int | None = None
    document_pages: int | None = None
    max_waste_fraction: float | None = None
    transfer_unit_mb: float | None = None


def page_boundary_waste(shared_tokens: int, page_size: int, *, document_tokens: int | None = None,
                        bytes_per_token: int | None = None) -> PageWaste:
    """Boundary waste of a paged radix cache.

    Casebook case 2: with page size 64 and two prefixes identical through token 20,010 (0-based, so 20,011
    shared tokens), the page 19,968-20,031 is recomputed and 43 reusable tokens are wasted; the waste is at
    most page size - 1 = 63 tokens, 0.3% of a 20,000-token document of 313 pages, and one page of 64 × 96 KB
    moves as a 6.1 MB transfer unit.

    Args:
        shared_tokens: Number of leading tokens the two prefixes have in common.
        page_size: `--page-size`, tokens per KV page.
        document_tokens: A document length, to express the worst case as a fraction and count pages.
        bytes_per_token: KV bytes per token, to size one page as a transfer unit.

    Returns:
        Reusable and wasted tokens, and the worst case.

    Raises:
        CalcInputError: When the page size is not positive or a length is negative (or absurdly large).
    """
    check("page_size", page_size, POSITIVE_COUNT)
    check("shared_tokens", shared_tokens, Bound(0, TOKENS.high))
    if document_tokens is not None:
        check("document_tokens", document_tokens, TOKENS)
    if bytes_per_token is not None:
        check("bytes_per_token", bytes_per_token, KV_BYTES)
    reusable = shared_tokens // page_size * page_size
    pages = fraction = unit = None
    if document_tokens:
        pages = math.ceil(document_tokens / page_size)
        fraction = (page_size - 1) / document_tokens
    if bytes_per_token:
        unit = page_size * bytes_per_token / MB
    return PageWaste(
        shared_tokens=shared_tokens, page_size=page_size, reusable_tokens=reusable,
        wasted_tokens=shared_tokens - reusable, max_wasted_tokens=page_size - 1, document_tokens=document_tokens,
        document_pages=pages, max_waste_fraction=fraction, transfer_unit_mb=unit,
    )
