"""Benchmark requests: lengths, token content as shared blocks, schemas and arrival order.

A prompt is a short tuple of blocks `(block_id, tokens)` laid out as the workload's prefix structure says
(`PrefixStructure`): equal block ids hold equal tokens, so two prompts share exactly the tokens of their
common leading blocks, which is what a radix tree matches (`mem_cache/radix_cache.py` match_prefix).
Unique content (questions, variable fields, random-dataset prompts) gets a block id of its own. A trace's
requests (`bench.dataset = "trace"`) are laid out from their own hash ids instead, one block per id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from service.domain import (
    BenchSpec,
    LengthDist,
    ModelSpec,
    PrefixStructure,
    StructuredOutput,
    TraceRecord,
    TraceSpec,
    WorkloadProfile,
)
from service.domain.workload import OWN_TAIL_TOKENS, TAIL_CAP_OVER_P95

if TYPE_CHECKING:  # radix.py imports this module
    from service.simulator.radix import Node

SYSTEM_BLOCK = 1
TOOLS_BLOCK = 2
DOCUMENT_BASE = 1_000
HISTORY_BASE = 10_000_000
# Variable fields that keep their value for a period get the id PERIOD_BASE + period index when sent.
PERIOD_BASE = 1 << 39
PERIOD_PENDING = PERIOD_BASE - 1
UNIQUE_BASE = 1 << 40
# A trace's hash id h is block TRACE_BASE + h: above every unique block (UNIQUE_BASE + 4 x request index).
TRACE_BASE = 1 << 48
MIN_UNIQUE_TAIL = OWN_TAIL_TOKENS  # every prompt ends with its own question, however short
# bench_serving's warm-up repeats the first dataset row with output_len=min(out, 32) (benchmark/serving.py).
WARMUP_OUTPUT_CAP = 32
_DOCUMENT_SEED = 20_001_000


@dataclass(slots=True, eq=False)
class SimRequest:
    """One request's identity and progress; times are simulated seconds."""

    rid: int
    blocks: tuple[tuple[int, int], ...]
    input_len: int
    output_len: int
    max_new_tokens: int
    schema: int = -1
    warmup: bool = False
    arrival: float = 0.0
    prefix_len: int = 0
    extended: int = 0
    generated: int = 0
    first_token: float = -1.0
    finish: float = -1.0
    cached_tokens: int = 0
    host_hit_tokens: int = 0
    retracted: int = 0
    slot: int = -1
    lock: Node | None = None
    worker: int = -1
    decode_worker: int = -1
    ready_at: float = 0.0
    last_token: float = -1.0
    issued: float = 0.0
    aborted: bool = False
    failure: str = ""
    output_cut: int = 0  # output tokens the server's max_req_len took off (SGLang caps max_new_tokens)

    @property
    def remaining_prefill(self) -> int:
        return self.input_len + self.generated - self.prefix_len - self.extended


# Prompts are drawn up to this many tokens short of the model's context window.
CONTEXT_MARGIN = 64


def sample_lengths(dist: LengthDist, n: int, rng: np.random.Generator, cap: int) -> np.ndarray:
    """Draw `n` token lengths from a `LengthDist`, clipped to [minimum, maximum or cap].

    `uniform` follows bench_serving's random dataset: `randint(max(int(L*ratio), 1), L + 1)` with
    L = `median` (`benchmark/datasets/common.py:compute_random_lens`).
    """
    hi = min(dist.maximum or cap, cap)
    if dist.kind == "fixed":
        out = np.full(n, dist.median, dtype=np.int64)
    elif dist.kind == "uniform":
        out = rng.integers(max(int(dist.median * dist.range_ratio), 1), dist.median + 1, size=n)
    elif dist.kind == "empirical" and dist.samples:
        out = rng.choice(np.asarray(dist.samples, dtype=np.int64), size=n)
    else:
        p95 = dist.lognormal_p95()
        sigma = max(np.log(max(p95, dist.median + 1) / dist.median) / 1.645, 1e-3)
        out = np.rint(rng.lognormal(np.log(dist.median), sigma, size=n)).astype(np.int64)
        if dist.maximum is None:
            hi = min(hi, TAIL_CAP_OVER_P95 * p95)  # a fitted log-normal's far tail is not in any measured log
    return np.clip(out, max(dist.minimum, 1), max(hi, 1))


def _document_ids(prefix: PrefixStructure, n: int, rng: np.random.Generator) -> np.ndarray:
    """Documents by popularity (casebook case 2: 80% of traffic on 50 of 1,000 documents)."""
    docs = prefix.documents
    if docs is None:
        return np.full(n, -1, dtype=np.int64)
    popular = min(docs.popular, docs.count)
    hot = rng.random(n) < (docs.popular_share if popular else 0.0)
    cold_lo = popular if popular < docs.count else 0
    return np.where(hot, rng.integers(0, max(popular, 1), size=n), rng.integers(cold_lo, docs.count, size=n))


def document_lengths(prefix: PrefixStructure, input_dist: LengthDist, cap: int) -> np.ndarray | None:
    """Each document's own length, so a prompt's length spread comes from its document, as in real corpora.

    Casebook case 2 prompts are [system][document][~30-token question]: the input p95 (24,800 against a
    20,530 median) is a longer document, not a longer question, and every request for a document repeats its
    length. Lengths are the input distribution less the other fixed parts and the question, drawn once per
    corpus with a fixed seed (the same documents in every round), so prompts keep the profile's input lengths.
    """
    docs = prefix.documents
    if docs is None or docs.count <= 0:
        return None
    others = prefix.system_prompt_tokens + prefix.variable_tokens + prefix.tool_definition_tokens \
        + prefix.history_tokens + MIN_UNIQUE_TAIL
    drawn = sample_lengths(input_dist, docs.count, np.random.default_rng(_DOCUMENT_SEED), cap) - others
    lengths: np.ndarray = np.maximum(drawn, 1).astype(np.int64)
    return lengths


def layout_blocks(prefix: PrefixStructure, length: int, rid: int, doc: int, conversation: int,
                  doc_tokens: int | None = None) -> tuple[tuple[int, int], ...]:
    """Lay a prompt of `length` tokens out as blocks, in `PrefixStructure`'s order.

    Fixed parts are cut at the end when the prompt is shorter than them, always leaving a unique tail.
    `doc_tokens` is the document's own length (default: the corpus' stated length).
    """
    unique = UNIQUE_BASE + rid * 4
    head: list[tuple[int, int]] = []
    tail: list[tuple[int, int]] = []
    if prefix.variable_tokens and prefix.variable_position == "front":
        front = unique + 1 if prefix.variable_period_s is None else PERIOD_PENDING
        head.append((front, prefix.variable_tokens))
    if prefix.system_prompt_tokens:
        head.append((SYSTEM_BLOCK, prefix.system_prompt_tokens))
    tools = (TOOLS_BLOCK, prefix.tool_definition_tokens) if prefix.tool_definition_tokens else None
    if tools and prefix.tools_position == "first":
        head.append(tools)
    if doc >= 0 and prefix.documents is not None:
        head.append((DOCUMENT_BASE + doc, doc_tokens or prefix.documents.tokens))
    if prefix.history_tokens:
        hid = HISTORY_BASE + conversation if conversation >= 0 else unique + 2
        head.append((hid, prefix.history_tokens))
    if tools and prefix.tools_position == "after_history":
        head.append(tools)
    if prefix.variable_tokens and prefix.variable_position == "back":
        tail.append((unique + 3, prefix.variable_tokens))
    return _fit(head, tail, length, unique)


def stamp_period(r: SimRequest, now: float, period_s: float | None) -> None:
    """Give a request's slowly varying front fields the value of the period it is sent in."""
    if period_s is None or not r.blocks or r.blocks[0][0] != PERIOD_PENDING:
        return
    stamped = (PERIOD_BASE + int(now // max(period_s, 1e-9)), r.blocks[0][1])
    r.blocks = (stamped, *r.blocks[1:])


def _fit(head: list[tuple[int, int]], tail: list[tuple[int, int]], length: int, unique: int
         ) -> tuple[tuple[int, int], ...]:
    fixed = sum(n for _, n in head) + sum(n for _, n in tail)
    question = max(length - fixed, MIN_UNIQUE_TAIL)
    budget = max(length - question - sum(n for _, n in tail), 0)
    blocks: list[tuple[int, int]] = []
    for bid, n in head:
        if budget <= 0:
            break
        blocks.append((bid, min(n, budget)))
        budget -= min(n, budget)
    blocks.append((unique, question))
    blocks.extend(tail)
    return tuple(blocks)


def build_requests(workload: WorkloadProfile, bench: BenchSpec, model: ModelSpec, rng: np.random.Generator,
                   count: int | None = None, stride: int = 1) -> tuple[list[SimRequest], list[SimRequest]]:
    """Warm-up requests and measured requests.

    The warm-up is `bench.warm_prompts` requests drawn from the workload (traffic a live service served
    before the run, which leaves its prefix cache in steady state), then bench_serving's own warm-up:
    copies of the first measured row. With a trace, both come from its records, and `stride` keeps every
    stride-th of them (the share of one representative replica).
    """
    n = count if count is not None else bench.num_prompts
    served_count = max(bench.warm_prompts, 0)
    if bench.trace is not None:
        served, requests = trace_requests(bench.trace, bench, model, served_count, n, stride)
        schemas = _schemas(workload, len(served) + len(requests), rng)
        for r, schema in zip([*served, *requests], schemas, strict=True):
            r.schema = int(schema)
    else:
        rows = _workload_requests(workload, bench, model, rng, served_count + n)
        served, requests = rows[:served_count], rows[served_count:]
    for r in served:
        r.warmup = True
    first = requests[0] if requests else None
    warm = [] if first is None else [
        SimRequest(rid=-(k + 1), blocks=first.blocks, input_len=first.input_len,
                   output_len=min(first.output_len, WARMUP_OUTPUT_CAP),
                   max_new_tokens=min(first.max_new_tokens, WARMUP_OUTPUT_CAP), schema=first.schema, warmup=True,
                   arrival=served[-1].arrival if served else 0.0)
        for k in range(bench.warmup_requests)]
    return served + warm, requests


def trace_requests(trace: TraceSpec, bench: BenchSpec, model: ModelSpec, served: int, n: int, stride: int = 1
                   ) -> tuple[list[SimRequest], list[SimRequest]]:
    """The trace's first `served` records (traffic served before the run) and the `n` after them, each part
    in time order with arrivals in seconds from its first record (bench_serving reads the first lines of a
    trace, then replays them by timestamp: `benchmark/datasets/mooncake.py`, `get_mooncake_request_over_time`).

    A request the server would refuse, its prompt and `max_new_tokens` together longer than the model's
    context, is marked failed with SGLang's message (`managers/tokenizer_manager.py` _validate_one_request).
    """
    before, measured = trace.parts(served, n)
    return (_timed(trace, bench, model, list(enumerate(before))[::stride]),
            _timed(trace, bench, model, list(enumerate(measured, start=len(before)))[::stride]))


def _timed(trace: TraceSpec, bench: BenchSpec, model: ModelSpec, part: list[tuple[int, TraceRecord]]
           ) -> list[SimRequest]:
    part = sorted(part, key=lambda item: item[1].timestamp)
    start = part[0][1].timestamp if part else 0.0
    out: list[SimRequest] = []
    for rid, record in part:
        max_new = _max_new_tokens(bench, record.output_length)
        r = SimRequest(rid=rid, blocks=trace_blocks(record, trace.block_tokens, rid), input_len=record.input_length,
                       output_len=min(record.output_length, max_new), max_new_tokens=max_new,
                       arrival=(record.timestamp - start) / 1000 * trace.slowdown if trace.timestamps else 0.0)
        if record.input_length + max_new > model.max_context:
            r.aborted, r.failure = True, (
                f"refused: requested token count exceeds the model's maximum context length of {model.max_context} "
                "tokens")
        out.append(r)
    return out


def trace_blocks(record: TraceRecord, block_tokens: int, rid: int) -> tuple[tuple[int, int], ...]:
    """A trace record's prompt: one block per hash id; tokens past the ids' blocks are the request's own."""
    blocks = [(TRACE_BASE + hash_id, tokens) for hash_id, tokens in record.blocks(block_tokens)]
    left = record.input_length - sum(tokens for _, tokens in blocks)
    if left > 0:
        blocks.append((UNIQUE_BASE + rid * 4, left))
    return tuple(blocks)


def _workload_requests(workload: WorkloadProfile, bench: BenchSpec, model: ModelSpec, rng: np.random.Generator,
                       n: int) -> list[SimRequest]:
    """`n` requests of the workload (lengths, documents, conversations, schemas), in sending order."""
    random_dataset = bench.dataset == "random"
    in_dist, out_dist = _dists(workload, bench)
    inputs = sample_lengths(in_dist, n, rng, cap=max(model.max_context - CONTEXT_MARGIN, 64))
    outputs = sample_lengths(out_dist, n, rng, cap=max(model.max_context // 2, 16))
    docs = _document_ids(workload.prefix, n, rng)
    doc_lengths = None if random_dataset else document_lengths(workload.prefix, in_dist,
                                                                max(model.max_context - CONTEXT_MARGIN, 64))
    convs = rng.integers(0, workload.prefix.conversations, size=n) if workload.prefix.conversations else None
    schemas = _schemas(workload, n, rng)
    requests: list[SimRequest] = []
    for i in range(n):
        length, out = int(inputs[i]), int(outputs[i])
        if random_dataset:
            blocks: tuple[tuple[int, int], ...] = ((UNIQUE_BASE + i * 4, length),)
        else:
            conv = int(convs[i]) if convs is not None else -1
            doc = int(docs[i])
            doc_tokens = int(doc_lengths[doc]) if doc_lengths is not None and doc >= 0 else None
            if doc_tokens is not None:
                length = _document_prompt_length(workload.prefix, doc_tokens)
            blocks = layout_blocks(workload.prefix, length, i, doc, conv, doc_tokens)
        length = sum(b for _, b in blocks)
        max_new = _max_new_tokens(bench, out)
        out = out if bench.ignore_eos else min(out, max_new)
        requests.append(SimRequest(rid=i, blocks=blocks, input_len=length, output_len=out,
                                   max_new_tokens=max_new, schema=int(schemas[i])))
    return requests


def _max_new_tokens(bench: BenchSpec, output_len: int) -> int:
    """What the client asks for: the output length under ignore_eos, else the bench's `max_new_tokens` cap."""
    return output_len if bench.ignore_eos or bench.max_new_tokens is None else max(bench.max_new_tokens, 1)


def _document_prompt_length(prefix: PrefixStructure, doc_tokens: int) -> int:
    """A document prompt's length: its fixed parts, its document and a question of `MIN_UNIQUE_TAIL` tokens."""
    return prefix.system_prompt_tokens + prefix.variable_tokens + prefix.tool_definition_tokens \
        + prefix.history_tokens + doc_tokens + MIN_UNIQUE_TAIL


def _dists(workload: WorkloadProfile, bench: BenchSpec) -> tuple[LengthDist, LengthDist]:
    if bench.dataset != "random":
        return workload.input, workload.output
    in_len = bench.random_input_len or workload.input.median
    out_len = bench.random_output_len or workload.output.median
    return (LengthDist(median=in_len, kind="uniform", range_ratio=bench.random_range_ratio),
            LengthDist(median=out_len, kind="uniform", range_ratio=bench.random_range_ratio))


def _schemas(workload: WorkloadProfile, n: int, rng: np.random.Generator) -> np.ndarray:
    so = workload.structured_output
    if so.mode != "json_schema" or so.schemas <= 0:
        return np.full(n, -1, dtype=np.int64)
    return schema_draw(so, n, rng)


def schema_draw(so: StructuredOutput, n: int, rng: np.random.Generator) -> np.ndarray:
    """The schema id of each of `n` requests: one of the known schemas by popularity, or a new one each."""
    if so.dynamic_schemas:
        return np.arange(n, dtype=np.int64) + 1_000_000  # every request brings a new schema
    # A few tool combinations dominate real traffic: Zipf-like popularity over the known schemas.
    weights = 1.0 / np.arange(1, max(so.schemas, 1) + 1)
    return rng.choice(max(so.schemas, 1), size=n, p=weights / weights.sum())
