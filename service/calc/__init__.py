"""Casebook formulas as pure functions: KV memory and capacity, threshold batch, throughput, cost, HiCache.

Units follow the casebook (see `service.calc.units`): KB = 1,024 bytes, GB = 10^6 KB.
"""

from service.calc import bounds
from service.calc.bounds import Bound, CalcInputError
from service.calc.hicache import HiCacheBreakEven, PageWaste, hicache_break_even, page_boundary_waste
from service.calc.memory import (
    KvCapacity,
    kv_bytes_per_token,
    kv_capacity,
    kv_memory_gb,
    mla_kv_bytes_per_token,
    model_kv_bytes_per_token,
    weight_memory_gb,
)
from service.calc.throughput import (
    RequiredThroughput,
    completion_hours,
    cost_per_million_output_tokens,
    required_throughput,
    threshold_batch_size,
)
from service.calc.units import GB, KB, MB, bytes_to_gb, gb_to_bytes

__all__ = [
    "GB", "KB", "MB", "Bound", "CalcInputError", "HiCacheBreakEven", "KvCapacity", "PageWaste", "RequiredThroughput", "bounds", "bytes_to_gb",
    "completion_hours", "cost_per_million_output_tokens", "gb_to_bytes", "hicache_break_even", "kv_bytes_per_token",
    "kv_capacity", "kv_memory_gb", "mla_kv_bytes_per_token", "model_kv_bytes_per_token", "page_boundary_waste",
    "required_throughput", "threshold_batch_size", "weight_memory_gb",
]
