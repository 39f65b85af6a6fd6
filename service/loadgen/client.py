"""One benchmark request over HTTP, timed exactly as `sglang.bench_serving` times it.

`sglang` backend (`/generate`): TTFT at the first chunk with non-empty `text`; afterwards each chunk's gap is
split evenly over its new tokens (`completion_tokens` growth), chunks without new tokens are skipped.
OpenAI backends: TTFT at the first chunk with non-empty text; each later chunk adds one ITL entry; the
output length comes from `usage.completion_tokens` when the server sends it (`benchmark/serving.py`).
A stream that ends without `[DONE]`, carries an `error` object (or an `event: error`) or data that is not JSON
fails the request.

A structured-output request (`PromptRequest.schema`) carries its JSON schema when it is constrained
(`sampling_params.json_schema` on `/generate`, `response_format` on the OpenAI routes, as SGLang reads them),
and its generated text is audited against the schema (`service.loadgen.schemas.audit`): the outcome keeps
its timings, and `invalid_json` names why the output is not what the schema asks for. `/generate` text is
cumulative unless the server streams deltas (`--incremental-streaming-output`): a chunk that does not
extend the text read so far is taken as a delta.

The stream is read as server-sent events, as a proxy in front of SGLang may send them: comment lines (`:`,
`: keep-alive`, `:ping`) and blank keep-alive lines are skipped, `id:` and `retry:` fields ignored, and an
event's `data:` lines are joined and dispatched at the blank line that ends it; events of another type
than the default (`event: ping`) carry no tokens. None of them reads the clock, so keep-alives never
move TTFT or an ITL gap, and only `data:` lines count as progress for the stall watchdog: a proxy's
keep-alives do not hide a stalled server. A line that is no SSE field at all fails the request.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

import httpx
import msgspec

from service.loadgen.prompts import PromptRequest
from service.loadgen.schemas import audit, schema_for, schema_text

Backend = Literal["sglang", "sglang-oai", "sglang-oai-chat"]
PATHS: dict[str, str] = {"sglang": "/generate", "sglang-oai": "/v1/completions",
                         "sglang-oai-chat": "/v1/chat/completions"}


class RequestOutcome(msgspec.Struct, kw_only=True):
    """What one request measured (seconds, wall clock)."""

    success: bool = False
    prompt_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    ttft: float = 0.0
    latency: float = 0.0
    itl: list[float] = msgspec.field(default_factory=list)
    started: float = 0.0
    error: str = ""
    # Why a structured request's output fails its schema (`parse`, `enum`, `required`, `type`...); "" when valid.
    invalid_json: str = ""


def payload(backend: str, request: PromptRequest, model: str, ignore_eos: bool) -> dict[str, Any]:
    """The request body bench_serving sends for `backend`."""
    constrained = request.constrained and request.schema >= 0
    if backend == "sglang":
        params: dict[str, Any] = {"temperature": 0.0, "max_new_tokens": request.output_tokens, "ignore_eos": ignore_eos}
        if constrained:
            params["json_schema"] = schema_text(request.schema)
        return {"text": request.text, "stream": True, "sampling_params": params}
    body: dict[str, Any] = {"model": model, "temperature": 0.0, "max_tokens": request.output_tokens, "stream": True,
                            "stream_options": {"include_usage": True}, "ignore_eos": ignore_eos}
    if constrained:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": f"schema_{request.schema}",
                                                                          "schema": schema_for(request.schema)}}
    if backend == "sglang-oai-chat":
        body["messages"] = [{"role": "user", "content": request.text}]
    else:
        body["prompt"] = request.text
    return body


class _StreamState:
    """Running measurements of one stream."""

    def __init__(self, outcome: RequestOutcome, start: float) -> None:
        self.outcome = outcome
        self.start = start
        self.previous = start
        self.last_count = 0
        self.done = False
        self.data: list[str] = []  # the `data:` lines of the event being read
        self.event = ""
        self.text = ""  # the generated text so far

    def first_or_gap(self, now: float, new_tokens: int) -> None:
        """Record the first token, or split the gap since the previous chunk over `new_tokens`."""
        if self.outcome.ttft == 0.0:
            self.outcome.ttft = now - self.start
        elif new_tokens > 0:
            self.outcome.itl += [(now - self.previous) / new_tokens] * new_tokens
        self.previous = now


def _native_chunk(state: _StreamState, data: dict[str, Any], now: float) -> None:
    meta = data.get("meta_info") or {}
    text = data.get("text")
    if not text:
        return
    state.text = text if text.startswith(state.text) else state.text + text  # cumulative, or a delta
    count = int(meta.get("completion_tokens", state.last_count + 1))
    new = count - state.last_count
    if state.outcome.ttft != 0.0 and new <= 0:
        return
    state.first_or_gap(now, new)
    state.last_count = count
    state.outcome.output_tokens = count
    state.outcome.prompt_tokens = int(meta.get("prompt_tokens", state.outcome.prompt_tokens))
    state.outcome.cached_tokens = int(meta.get("cached_tokens", 0) or 0)


def _openai_chunk(state: _StreamState, data: dict[str, Any], now: float) -> None:
    usage = data.get("usage")
    if usage:
        state.outcome.output_tokens = int(usage.get("completion_tokens", state.outcome.output_tokens))
        state.outcome.prompt_tokens = int(usage.get("prompt_tokens", state.outcome.prompt_tokens))
        details = usage.get("prompt_tokens_details") or {}
        state.outcome.cached_tokens = int(details.get("cached_tokens", 0) or 0)
    choices = data.get("choices") or []
    if not choices:
        return
    choice = choices[0]
    text = choice.get("text") if "text" in choice else (choice.get("delta") or {}).get("content")
    if text:
        state.text += text
        if state.outcome.ttft == 0.0:
            state.outcome.ttft = now - state.start
        else:
            state.outcome.itl.append(now - state.previous)
        state.previous = now
        state.last_count += 1


_IGNORED_FIELDS = frozenset({"id", "retry"})
_TOKEN_EVENTS = frozenset({"", "message", "error"})


def _read_line(state: _StreamState, line: str, backend: str, clock: Callable[[], float]) -> bool:
    """One line of the event stream: a field of the current event, a comment, or the blank line ending it.

    Returns whether the line carried data: keep-alives are no sign that the server is making progress.
    """
    line = line.rstrip("\r\n")
    if not line.strip():
        _dispatch(state, backend, clock)
        return False
    if line.startswith(":"):
        return False  # a comment: a proxy's keep-alive
    name, _, value = line.partition(":")
    value = value[1:] if value.startswith(" ") else value
    if name == "data":
        state.data.append(value)
        return True
    if name == "event":
        state.event = value.strip()
    elif name not in _IGNORED_FIELDS:
        raise ValueError(f"unexpected line in the event stream: {line[:80]!r}")
    return False


def _dispatch(state: _StreamState, backend: str, clock: Callable[[], float]) -> None:
    """The event read so far, at the blank line that ends it (or at the end of the stream)."""
    body, event = "\n".join(state.data).strip(), state.event
    state.data, state.event = [], ""
    if not body or event not in _TOKEN_EVENTS:
        return  # a keep-alive, or an event of another type
    if body == "[DONE]":
        state.done = True
        return
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError:
        if event == "error":
            raise ValueError(f"server error mid-stream: {body[:200]}") from None
        raise ValueError(f"malformed JSON in the event stream: {body[:80]!r}") from None
    if not isinstance(data, dict):
        raise ValueError(f"unexpected event: {body[:80]!r}")
    if "error" in data or event == "error":
        error = data.get("error", data)
        raise ValueError(f"server error mid-stream: {error.get('message', error) if isinstance(error, dict) else error}")
    now = clock()
    (_native_chunk if backend == "sglang" else _openai_chunk)(state, data, now)


async def send_request(client: httpx.AsyncClient, base_url: str, backend: str, request: PromptRequest, *,
                       model: str, ignore_eos: bool = True, on_progress: Callable[[], None] | None = None,
                       clock: Callable[[], float] = time.perf_counter) -> RequestOutcome:
    """Send one streamed request; never raises for a server or transport fault (the outcome says why)."""
    outcome = RequestOutcome(prompt_tokens=request.prompt_tokens)
    start = outcome.started = clock()
    state = _StreamState(outcome, start)
    try:
        async with client.stream("POST", base_url + PATHS[backend],
                                 json=payload(backend, request, model, ignore_eos)) as response:
            if response.status_code != 200:
                body = (await response.aread()).decode(errors="replace")
                outcome.error = f"HTTP {response.status_code}: {body[:200]}"
                return outcome
            async for line in response.aiter_lines():
                if _read_line(state, line, backend, clock) and on_progress is not None:
                    on_progress()
            _dispatch(state, backend, clock)  # an event the stream ended without a blank line after
    except (httpx.HTTPError, ValueError) as exc:
        outcome.error = str(exc) or type(exc).__name__
        return outcome
    outcome.latency = clock() - start
    if not state.done:
        outcome.error = "the event stream ended before data: [DONE] (truncated)"
        return outcome
    if backend != "sglang" and outcome.output_tokens == 0:
        outcome.output_tokens = request.output_tokens  # bench_serving falls back to the requested length
    outcome.success = outcome.ttft > 0.0
    if not outcome.success:
        outcome.error = "the stream carried no output token"
    elif request.schema >= 0:
        outcome.invalid_json = audit(state.text, request.schema)
    return outcome
