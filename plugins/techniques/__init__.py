"""Built-in techniques (loaded through the `sglang_tuner` entry-point group): one per casebook technique."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from plugins.techniques.batch_parameters import BatchParameters
from plugins.techniques.caching import HiCache, PromptStructure
from plugins.techniques.chunked_prefill import ChunkedPrefill
from plugins.techniques.grammar import Grammar
from plugins.techniques.model_selection import ModelSelection
from plugins.techniques.moe import MoeParallelism, PdDisaggregation
from plugins.techniques.parallelism import Parallelism, RouterPolicy
from plugins.techniques.quantization import Quantization
from plugins.techniques.right_sizing import RightSizing, ScaleOut
from plugins.techniques.scheduling import RadixCache, SchedulingLimits
from plugins.techniques.speculative_decoding import SpeculativeDecoding
from service import Technique, hookimpl

TECHNIQUES: tuple[type[Technique], ...] = (
    ModelSelection, Grammar, ScaleOut, Parallelism, ChunkedPrefill, RadixCache, RouterPolicy, PromptStructure, HiCache,
    Quantization, SchedulingLimits, BatchParameters, SpeculativeDecoding, MoeParallelism, PdDisaggregation, RightSizing,
)


@hookimpl
def register_techniques(register: Callable[[Any], None]) -> None:
    """Register every built-in technique."""
    for technique in TECHNIQUES:
        register(technique())
