"""Benchmark prompts as text: the simulator's request layout, written out one word per token.

The simulator lays each prompt out as blocks of the workload's prefix structure (system prompt, documents,
history, question); here every block becomes words chosen by its block id, so prompts that share a block
share its exact text. A router's cache-aware tree and a server's radix cache then see real shared prefixes,
and the same seed gives the same lengths and layout as a simulated round.
"""

from __future__ import annotations

import itertools

import msgspec
import numpy as np

from service.domain import BenchSpec, ModelSpec, WorkloadProfile
from service.simulator.requests import SimRequest, build_requests

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z")
_VOWELS = ("a", "e", "i", "o", "u")
# Two-syllable words: 4,900 distinct short words that tokenizers keep to one or two tokens each.
VOCABULARY = tuple("".join(parts) for parts in itertools.product(_ONSETS, _VOWELS, _ONSETS, _VOWELS))


class PromptRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One request to send: the prompt text, its token count under one-word-per-token, and the output length.

    `served` marks the workload's traffic a live service had already served (`bench.warm_prompts`): sent
    before bench_serving's own warm-up, excluded from the figures like it. `arrival` is a trace's send time, in
    seconds from the start of its phase (None: sent as the concurrency limit or the request rate allows).
    """

    index: int
    text: str
    prompt_tokens: int
    output_tokens: int
    warmup: bool = False
    served: bool = False
    arrival: float | None = None


def block_words(block_id: int, count: int) -> list[str]:
    """`count` words standing for block `block_id` (equal ids give equal words)."""
    rng = np.random.default_rng(block_id & 0xFFFF_FFFF_FFFF_FFFF)
    return [VOCABULARY[i] for i in rng.integers(0, len(VOCABULARY), size=count)]


def prompt_text(request: SimRequest) -> str:
    """The prompt of a simulated request, block by block."""
    words: list[str] = []
    for block_id, count in request.blocks:
        words += block_words(block_id, count)
    return " ".join(words)


def build_prompts(workload: WorkloadProfile, bench: BenchSpec, model: ModelSpec,
                  seed: int | None = None) -> tuple[list[PromptRequest], list[PromptRequest]]:
    """Warm-up and measured requests for a bench, laid out as the simulator lays them out for `seed`.

    The warm-up list starts with `bench.warm_prompts` requests drawn from the workload (marked `served`):
    they are rows of their own, before the measured ones, so they share documents, system prompts and
    conversations with the measured requests but never a measured request's own question. bench_serving's
    warm-up (copies of the first measured row) follows them.
    """
    rng = np.random.default_rng(bench.seed if seed is None else seed)
    warm, measured = build_requests(workload, bench, model, rng)
    timed = bench.trace is not None and bench.trace.timestamps

    def convert(request: SimRequest, index: int) -> PromptRequest:
        """One simulated request as a prompt to send."""
        is_served = request.warmup and request.rid >= 0  # bench_serving's warm-up copies have ids below 0
        return PromptRequest(index=index, text=prompt_text(request), prompt_tokens=request.input_len,
                             output_tokens=request.max_new_tokens, warmup=request.warmup, served=is_served,
                             arrival=request.arrival if timed and (is_served or not request.warmup) else None)

    return ([convert(r, i) for i, r in enumerate(warm)], [convert(r, i) for i, r in enumerate(measured)])
