"""Traces and profiles: a request log written as a trace, and a trace's own workload profile.

`log_trace` turns a tokenized log into a trace in Mooncake's format (lengths, arrival times, block hash ids;
no text), which `bench.dataset = "trace"` replays. `profile_trace` measures what `profile_log` measures from a
trace alone, at the granularity of its blocks: two prompts share a block exactly when they share its id.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypeAlias

from service.domain import TRACE_BLOCK_TOKENS, MeasuredProfile, TraceRecord
from service.profile.prefix import TokenIds
from service.profile.records import LogRecord
from service.profile.timing import casebook_median, casebook_p95, request_rates
from service.traces import TraceBuilder, read_trace, trace_sharing

# A prefix-cache node: the child under each block hash id.
_PrefixNode: TypeAlias = dict[int, "_PrefixNode"]


class TraceTimesMissing(ValueError):
    """A log line without a start time cannot become a trace record."""


def log_trace(records: Sequence[LogRecord], prompts: Sequence[TokenIds], completions: Sequence[TokenIds],
              block_tokens: int = TRACE_BLOCK_TOKENS) -> list[TraceRecord]:
    """One trace record per request, in start order, timestamps in ms from the first start.

    Raises:
        TraceTimesMissing: A record has no start time (`timestamp`, `ts` or `start_time`), naming its line.
    """
    missing = next((r.line for r in records if r.start is None), None)
    if missing is not None:
        raise TraceTimesMissing(f"line {missing} has no start time (timestamp, ts or start_time): a trace needs one "
                                "on every request")
    starts = [r.start for r in records if r.start is not None]
    order = sorted(range(len(starts)), key=lambda i: (starts[i], i))
    first = starts[order[0]] if order else 0.0
    builder = TraceBuilder(block_tokens)
    return [builder.record((starts[i] - first) * 1000, prompts[i], len(completions[i])) for i in order]


def _radix_reuse(records: Sequence[TraceRecord], block_tokens: int) -> float:
    """Share of input tokens a never-evicting prefix cache serves, replaying the trace in time order."""
    root: _PrefixNode = {}
    served = 0
    for record in sorted(records, key=lambda r: r.timestamp):
        node, matching = root, True
        for hash_id, tokens in record.blocks(block_tokens):
            child = node.get(hash_id)
            if child is None:
                matching, child = False, node.setdefault(hash_id, {})
            elif matching:
                served += tokens
            node = child
    return served / max(sum(r.input_length for r in records), 1)


def profile_trace(source: Path | Sequence[TraceRecord], block_tokens: int = TRACE_BLOCK_TOKENS) -> MeasuredProfile:
    """Lengths, prefix sharing, radix reuse and request rates of a trace (a file or its records).

    Peak concurrency needs end times, which a trace does not have: it is left out.
    """
    records = read_trace(source) if isinstance(source, Path) else list(source)
    ins = [r.input_length for r in records]
    outs = [r.output_length for r in records]
    mean_rate, peak_rate = request_rates([r.timestamp / 1000 for r in records])
    return MeasuredProfile(
        requests=len(records), skipped_lines=0,
        input_median=casebook_median(ins), input_p95=casebook_p95(ins),
        output_median=casebook_median(outs), output_p95=casebook_p95(outs),
        prefix_sharing_rate=trace_sharing(records, block_tokens), radix_reuse_rate=_radix_reuse(records, block_tokens),
        request_rate=mean_rate, peak_request_rate=peak_rate)
