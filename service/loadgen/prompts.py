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
from service.loadgen.schemas import PROMPT_MARKER, SCHEMA_SEED, schema_text
from service.simulator.requests import SimRequest, build_requests, schema_draw

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z")
_VOWELS = ("a", "e", "i", "o", "u")
# Two-syllable words: 4,900 distinct short words that tokenizers keep to one or two tokens each.
VOCABULARY = tuple("".join(parts) for parts in itertools.product(_ONSETS, _VOWELS, _ONSETS, _VOWELS))


class PromptRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One request to send: the prompt text, its token count under one-word-per-token, and the output length.

    `served` marks the workload's traffic a live service had already served (`bench.warm_prompts`): sent
    before bench_serving's own warm-up, excluded from the figures like it. `arrival` is a trace's send time, in
    seconds from the start of its phase (None: sent as the concurrency limit or the request rate allows).
    `schema` is the id of the JSON schema its output must follow (-1: none; `service.loadgen.schemas`), and
    `constrained` whether the request carries it for the server's grammar backend (a `json_schema` workload)
    rather than only in the prompt.
    """

    index: int
    text: str
    prompt_tokens: int
    output_tokens: int
    warmup: bool = False
    served: bool = False
    arrival: float | None = None
    schema: int = -1
    constrained: bool = False


def block_words(block_id: int, count: int) -> list[str]:
    """`count` words standing for block `block_id` (equal ids give equal words)."""
    rng = np.random.default_rng(block_id & 0xFFFF_FFFF_FFFF_FFFF)
    return [VOCABULARY[i] for i in rng.integers(0, len(VOCABULARY), size=count)]


def prompt_text(request: SimRequest, schema: int = -1) -> str:
    """The prompt of a simulated request, block by block; with a schema, its last word names it."""
    words: list[str] = []
    for block_id, count in request.blocks:
        words += block_words(block_id, count)
    if schema >= 0 and words:
        words[-1] = PROMPT_MARKER + schema_text(schema)
    return " ".join(words)


def build_prompts(workload: WorkloadProfile, bench: BenchSpec, model: ModelSpec,
                  seed: int | None = None) -> tuple[list[PromptRequest], list[PromptRequest]]:
    """Warm-up and measured requests for a bench, laid out as the simulator lays them out for `seed`.

    The warm-up list starts with `bench.warm_prompts` requests drawn from the workload (marked `served`):
    they are rows of their own, before the measured ones, so they share documents, system prompts and
    conversations with the measured requests but never a measured request's own question. bench_serving's
    warm-up (copies of the first measured row) follows them.

    A structured-output workload's prompts name their schema in their last word; with `cache_warmed`, the
    warm-up ends with one constrained request per known schema (`schema_warmers`). A `json_schema` workload's
    requests carry the simulator's schema ids; a prompt-only one's are drawn from a generator of their own, so
    the simulator's draws stay as they are.
    """
    rng = np.random.default_rng(rng_seed(bench, seed))
    warm, measured = build_requests(workload, bench, model, rng)
    timed = bench.trace is not None and bench.trace.timestamps
    structured = workload.structured_output
    constrained = structured.mode == "json_schema"
    drawn = (schema_draw(structured, len(warm) + len(measured),
                         np.random.default_rng([rng_seed(bench, seed), SCHEMA_SEED]))
             if structured.mode != "none" else None)
    # The schema of each row: the simulator's (a json_schema workload), else drawn; copies share the first's.
    schemas = [r.schema if r.schema >= 0 or drawn is None else int(drawn[slot])
               for slot, r in enumerate([*measured, *warm])]
    copied = schemas[0] if measured else -1

    def convert(request: SimRequest, index: int, schema: int) -> PromptRequest:
        """One simulated request as a prompt to send."""
        is_served = request.warmup and request.rid >= 0  # bench_serving's warm-up copies have ids below 0
        schema = schema if is_served or not request.warmup else copied
        return PromptRequest(index=index, text=prompt_text(request, schema), prompt_tokens=request.input_len,
                             output_tokens=request.max_new_tokens, warmup=request.warmup, served=is_served,
                             arrival=request.arrival if timed and (is_served or not request.warmup) else None,
                             schema=schema, constrained=constrained and schema >= 0)

    warm_rows = [convert(r, i, schemas[len(measured) + i]) for i, r in enumerate(warm)]
    if constrained and structured.cache_warmed and not structured.dynamic_schemas:
        warm_rows += schema_warmers(structured.schemas, start=len(warm_rows))
    return warm_rows, [convert(r, i, schemas[i]) for i, r in enumerate(measured)]


def schema_warmers(schemas: int, start: int = 0) -> list[PromptRequest]:
    """What `warm_grammar.sh` sends at startup: one constrained one-token request per known schema, so every
    schema's grammar is compiled before the measured run (casebook case 4, round 2)."""
    return [PromptRequest(index=start + k, text="warmup " + PROMPT_MARKER + schema_text(k), prompt_tokens=2,
                          output_tokens=1, warmup=True, schema=k, constrained=True) for k in range(schemas)]


def rng_seed(bench: BenchSpec, seed: int | None) -> int:
    """The seed a round's requests are drawn with."""
    return bench.seed if seed is None else seed
