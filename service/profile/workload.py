"""`profile_log`: measure a workload profile from a request log (casebook "Workload Profile")."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from service.domain import TRACE_BLOCK_TOKENS, MeasuredProfile
from service.profile.chat_template import ChatTemplate, ChatTemplateError
from service.profile.prefix import prefix_rates
from service.profile.records import ChatRenderer, LogRecord, MalformedLine, parse_line
from service.profile.timing import casebook_median, casebook_p95, peak_concurrency, request_rates
from service.profile.tokenize import SegmentTokenizer
from service.profile.trace import TraceTimesMissing, log_trace
from service.traces import write_trace

MAX_REPORTED_ERRORS = 1_000


class ProfileError(ValueError):
    """The log cannot be profiled (strict mode met a malformed line, or nothing usable is left)."""


def read_log(path: Path, *, strict: bool = False,
             chat: ChatRenderer | None = None) -> tuple[list[LogRecord], list[str], int]:
    """Parse a JSON-lines request log; `chat` renders chat messages (ChatML when None).

    Returns:
        The records, the error messages kept (at most `MAX_REPORTED_ERRORS`), and the number of lines skipped.

    Raises:
        ProfileError: In strict mode, at the first malformed line, naming it.
    """
    records: list[LogRecord] = []
    errors: list[str] = []
    skipped = 0
    with path.open("rb") as log:
        for number, raw in enumerate(log, start=1):
            try:
                record = parse_line(number, raw, chat)
            except MalformedLine as err:
                if strict:
                    raise ProfileError(f"{path}: {err}") from err
                skipped += 1
                if len(errors) < MAX_REPORTED_ERRORS:
                    errors.append(str(err))
                continue
            if record is not None:
                records.append(record)
    return records, errors, skipped


def profile_log(path: Path, tokenizer: SegmentTokenizer | Path, *, strict: bool = False, page_size: int = 1,
                cache_outputs: bool = True, trace_out: Path | None = None,
                block_tokens: int = TRACE_BLOCK_TOKENS, chat_template: ChatTemplate | bool = True) -> MeasuredProfile:
    """Measure input/output lengths, prefix sharing, radix reuse, concurrency and request rate.

    Does what the casebook's profile_workload.py does (median and p95 of input and output tokens with its
    index definitions, the sorted-adjacent prefix sharing rate) and more: the exact reuse rate of a radix
    cache that never evicts (log order), peak concurrency and request rates when lines carry times.

    Args:
        path: JSON-lines log (see `service.profile.records` for the accepted fields).
        tokenizer: A loaded tokenizer, or a folder holding tokenizer.json, or the file.
        strict: Fail on the first malformed line instead of skipping it.
        page_size: `--page-size` for the radix reuse replay.
        cache_outputs: Whether finished requests leave their outputs in the replayed cache, as SGLang does.
        trace_out: Also write the log as a trace in Mooncake's format (lengths, times, block hash ids), which a
            scenario's `bench.dataset = "trace"` replays.
        block_tokens: Tokens per hash id of that trace.
        chat_template: How chat messages become a prompt: True renders them with the model's own chat template
            when the tokenizer folder (the folder given, or the one holding the file) has one, else ChatML;
            False always ChatML; or the template to render them with.

    Returns:
        The measured profile; `errors` lists the skipped lines.

    Raises:
        ProfileError: On a malformed line in strict mode, when no request is usable, with `trace_out` when a
            line has no start time, or when the folder's chat template cannot be read.
    """
    template = _chat_template(tokenizer, chat_template)
    with gc_paused():
        return _profile(path, tokenizer, strict, page_size, cache_outputs, trace_out, block_tokens, template)


def _chat_template(tokenizer: SegmentTokenizer | Path, chosen: ChatTemplate | bool) -> ChatTemplate | None:
    """The template chat messages are rendered with: the one given, or the tokenizer folder's."""
    if isinstance(chosen, ChatTemplate):
        return chosen
    if not chosen or isinstance(tokenizer, SegmentTokenizer):
        return None
    try:
        return ChatTemplate.from_folder(tokenizer if tokenizer.is_dir() else tokenizer.parent)
    except ChatTemplateError as err:
        raise ProfileError(str(err)) from None


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: profiling makes millions of lists and strings and no cycles.

    With the collector on, its full passes over the growing heap took about a third of the profile's time.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _profile(path: Path, tokenizer: SegmentTokenizer | Path, strict: bool, page_size: int, cache_outputs: bool,
             trace_out: Path | None, block_tokens: int, template: ChatTemplate | None) -> MeasuredProfile:
    records, errors, skipped = read_log(path, strict=strict, chat=template.pieces if template is not None else None)
    if not records:
        raise ProfileError(f"{path}: no usable request lines")
    segmenter = tokenizer if isinstance(tokenizer, SegmentTokenizer) else SegmentTokenizer.from_path(tokenizer)
    prompts = segmenter.encode_prompts([r.prompt_pieces for r in records], [r.templated for r in records])
    completions = segmenter.encode_texts(r.completion for r in records)
    if trace_out is not None:
        try:
            write_trace(trace_out, log_trace(records, prompts, completions, block_tokens))
        except TraceTimesMissing as err:
            raise ProfileError(f"{path}: {err}") from None
    ins = [len(p) for p in prompts]
    outs = [len(c) for c in completions]
    starts = [r.start for r in records if r.start is not None]
    intervals = [(r.start, r.end) for r in records if r.start is not None and r.end is not None]
    mean_rate, peak_rate = request_rates(starts) if starts else (None, None)
    sharing, radix_reuse = prefix_rates(prompts, completions if cache_outputs else None, page_size)
    return MeasuredProfile(
        requests=len(records),
        skipped_lines=skipped,
        input_median=casebook_median(ins),
        input_p95=casebook_p95(ins),
        output_median=casebook_median(outs),
        output_p95=casebook_p95(outs),
        prefix_sharing_rate=sharing,
        radix_reuse_rate=radix_reuse,
        peak_concurrency=peak_concurrency(intervals) if intervals else None,
        request_rate=mean_rate,
        peak_request_rate=peak_rate,
        errors=errors,
    )
