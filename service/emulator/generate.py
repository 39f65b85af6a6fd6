"""Generation endpoints: `/generate` and the OpenAI-compatible completions, streamed as SGLang streams them.

Shapes follow `srt/entrypoints/http_server.py`, `openai/serving_chat.py`, `serving_completions.py` and
`usage_processor.py` (0.5.23): `/generate` streams cumulative `text` / `output_ids` with `meta_info` on every
chunk (delta chunks with `--incremental-streaming-output`); chat sends a role chunk, one content chunk per
token step, a separate finish chunk, then a usage chunk when asked for.

A request with a JSON schema (`sampling_params.json_schema`, the completions `json_schema` field, or
`response_format`) is constrained and its output follows the schema; one whose prompt only names a schema
(its last word, `service.loadgen.schemas.PROMPT_MARKER`) gets JSON that fails at the prompt-only rate
(`service/emulator/json_output.py`). Other outputs are plain words.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from service.emulator.engine import EmulatedEngine, LiveRequest
from service.emulator.http import BadRequest
from service.emulator.json_output import DEFAULT_FAILURE_RATE, document_pieces, failure_kind
from service.emulator.tokens import chat_ids, encode, output_words, word_ids
from service.loadgen.schemas import prompt_schema
from service.sglang import version_key

DEFAULT_MAX_NEW_TOKENS = 128  # SamplingParams.max_new_tokens default (srt/sampling/sampling_params.py)


class Generation:
    """One request's parameters, as the endpoints read them."""

    def __init__(self, prompt_ids: list[int], max_new_tokens: int, stream: bool, include_usage: bool, *,
                 schema: dict[str, Any] | None = None, constrained: bool = False) -> None:
        self.prompt_ids = prompt_ids
        self.max_new_tokens = max_new_tokens
        self.stream = stream
        self.include_usage = include_usage
        self.rid = uuid.uuid4().hex
        self.schema = schema  # the JSON schema the output follows (constrained) or is asked to in the prompt
        self.constrained = constrained
        self.pieces: list[str] | None = None  # the JSON document's tokens, once written


def _schema_arg(value: Any, field: str) -> dict[str, Any] | None:
    """A `json_schema` given as a JSON string (SGLang's sampling parameter) or an object."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise BadRequest(f"{field} is not valid JSON") from None
    if not isinstance(value, dict):
        raise BadRequest(f"{field} must be a JSON schema object")
    return value


def _response_format(body: dict[str, Any]) -> dict[str, Any] | None:
    """The schema of an OpenAI `response_format` (`json_schema` or `json_object`), or None."""
    form = body.get("response_format")
    if not isinstance(form, dict) or form.get("type") not in ("json_schema", "json_object"):
        return None
    if form["type"] == "json_object":
        return {"type": "object"}
    spec = form.get("json_schema") or {}
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if schema is None:
        raise BadRequest("schema_ is required for json_schema response format request.")
    return _schema_arg(schema, "response_format.json_schema.schema")


def _structured(constraint: dict[str, Any] | None, prompt: str) -> dict[str, Any]:
    """Generation keywords: the constraint, else the schema the prompt's last word asks for."""
    if constraint is not None:
        return {"schema": constraint, "constrained": True}
    return {"schema": prompt_schema(prompt)}


def native_request(body: Any) -> Generation:
    """Read a `/generate` body (`GenerateReqInput`); batch inputs are refused."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    text, ids = body.get("text"), body.get("input_ids")
    if isinstance(text, list) or (isinstance(ids, list) and ids and isinstance(ids[0], list)):
        raise BadRequest("batch requests are not supported by the emulator; send one prompt per request")
    if text is None and ids is None:
        raise BadRequest("Either text or input_ids should be provided.")
    params = body.get("sampling_params") or {}
    prompt = [int(i) for i in ids] if ids is not None else encode(str(text))
    max_new = params.get("max_new_tokens")
    return Generation(prompt, int(max_new if max_new is not None else DEFAULT_MAX_NEW_TOKENS),
                      bool(body.get("stream")), False,
                      **_structured(_schema_arg(params.get("json_schema"), "sampling_params.json_schema"),
                                    str(text or "")))


def openai_request(body: Any, chat: bool, default_usage: bool) -> Generation:
    """Read a `/v1/completions` or `/v1/chat/completions` body."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages must be a non-empty list")
        prompt = chat_ids(messages)
        last = messages[-1].get("content") if isinstance(messages[-1], dict) else None
        prompt_text = last if isinstance(last, str) else ""
        max_new = body.get("max_completion_tokens") or body.get("max_tokens") or DEFAULT_MAX_NEW_TOKENS
    else:
        raw = body.get("prompt")
        prompt_text = raw if isinstance(raw, str) else ""
        if isinstance(raw, list) and raw and isinstance(raw[0], int):
            prompt = [int(i) for i in raw]
        elif isinstance(raw, str):
            prompt = encode(raw)
        else:
            raise BadRequest("prompt must be a string or a list of token ids")
        max_new = body.get("max_tokens") or 16  # CompletionRequest.max_tokens default
    options = body.get("stream_options") or {}
    constraint = _response_format(body) or _schema_arg(body.get("json_schema"), "json_schema")
    return Generation(prompt, int(max_new), bool(body.get("stream")),
                      bool(options.get("include_usage")) or default_usage, **_structured(constraint, prompt_text))


def is_last(live: LiveRequest, count: int) -> bool:
    """Whether `count` is the request's final token count (the engine queued the end right after it)."""
    return live.finished_at >= 0 and count == live.published and live.updates.qsize() <= 1


async def counts(live: LiveRequest) -> AsyncIterator[int]:
    """Cumulative generated-token counts of a request, until it finishes."""
    while True:
        item = await live.updates.get()
        if item is None:
            return
        yield item


class Responder:
    """Builds the response bodies of one server (its version decides a few keys)."""

    def __init__(self, engine: EmulatedEngine, model_name: str, version: str, *, cache_report: bool,
                 incremental: bool, stream_interval: int, json_failure_rate: float = DEFAULT_FAILURE_RATE,
                 seed: int = 0) -> None:
        self.engine = engine
        self.json_failure_rate = json_failure_rate
        self.seed = seed
        self.model_name = model_name
        self.modern = version_key(version) >= (0, 5, 9)
        self.cache_report = cache_report
        self.incremental = incremental
        self.stream_interval = max(stream_interval, 1)

    def words(self, gen: Generation, live: LiveRequest, start: int, count: int) -> list[str]:
        """The text of tokens `start .. start+count-1`: JSON pieces for a structured request, else words."""
        if gen.schema is None:
            return output_words(live.sim.rid, start, count)
        if gen.pieces is None:
            fault = "" if gen.constrained else failure_kind(gen.prompt_ids, self.seed, self.json_failure_rate)
            gen.pieces = document_pieces(gen.schema, gen.max_new_tokens, fault)
        return gen.pieces[start:start + count]

    def meta_info(self, gen: Generation, live: LiveRequest, count: int, done: bool) -> dict[str, Any]:
        """`meta_info` of a `/generate` chunk."""
        sim = live.sim
        meta: dict[str, Any] = {"id": gen.rid, "finish_reason": None, "prompt_tokens": len(live.prompt_ids),
                                "weight_version": "default"}
        if self.modern:
            meta |= {"num_retractions": sim.retracted, "reasoning_tokens": 0}
        meta |= {"completion_tokens": count, "cached_tokens": sim.cached_tokens}
        if done:
            meta["finish_reason"] = ({"type": "abort", "message": live.error, "status_code": 500}
                                     if live.error else {"type": "length", "length": count})
            meta["e2e_latency"] = round(max(live.finished_at - live.arrived, 0.0), 6)
        return meta

    def native_body(self, gen: Generation, live: LiveRequest, start: int, count: int, done: bool) -> dict[str, Any]:
        """One `/generate` body: text and ids (cumulative, or the delta from `start`)."""
        first = start if self.incremental else 0
        words = self.words(gen, live, first, count - first)
        return {"text": " ".join(words), "output_ids": word_ids(words),
                "meta_info": self.meta_info(gen, live, count, done)}

    async def native_stream(self, gen: Generation, live: LiveRequest) -> AsyncIterator[dict[str, Any]]:
        """The `/generate` event stream."""
        sent, closed = 0, False
        async for count in counts(live):
            last = is_last(live, count)
            if last or count - sent >= self.stream_interval:
                yield self.native_body(gen, live, sent, count, last and not live.error)
                sent, closed = count, last and not live.error
        if live.error:
            yield {"error": {"message": live.error, "type": "invalid_request_error", "code": 400, "retryable": False}}
        elif not closed:
            yield self.native_body(gen, live, sent, live.published, True)

    async def native_once(self, gen: Generation, live: LiveRequest) -> dict[str, Any]:
        """The non-streamed `/generate` body."""
        async for _ in counts(live):
            pass
        return self.native_body(gen, live, 0, live.published, True)

    def usage(self, live: LiveRequest, chat: bool) -> dict[str, Any]:
        """OpenAI usage, with cached tokens under `--enable-cache-report`."""
        prompt, completion = len(live.prompt_ids), live.published
        usage: dict[str, Any] = {"prompt_tokens": prompt, "total_tokens": prompt + completion,
                                 "completion_tokens": completion,
                                 "prompt_tokens_details": {"cached_tokens": live.sim.cached_tokens}
                                 if self.cache_report else None, "reasoning_tokens": 0}
        if chat:
            usage["completion_tokens_details"] = None
        return usage

    def _chunk(self, gen: Generation, chat: bool, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {"id": gen.rid, "object": "chat.completion.chunk" if chat else "text_completion",
                "created": int(time.time()), "model": self.model_name, "choices": choices, **extra}

    async def openai_stream(self, gen: Generation, live: LiveRequest, chat: bool) -> AsyncIterator[dict[str, Any]]:
        """The completions or chat event stream."""
        sent = 0
        if chat:
            yield self._chunk(gen, chat, [{"index": 0, "delta": {"reasoning_content": None, "role": "assistant",
                                                                  "content": ""}, "logprobs": None,
                                           "finish_reason": None, "matched_stop": None}])
        finish = None
        async for count in counts(live):
            text = " " + " ".join(self.words(gen, live, sent, count - sent))
            sent = count
            if chat:
                choice = {"index": 0, "delta": {"reasoning_content": None, "content": text}}
            else:  # the last completions chunk carries the finish reason itself
                finish = "length" if is_last(live, count) and not live.error else None
                choice = {"index": 0, "text": text}
            yield self._chunk(gen, chat, [choice | {"logprobs": None, "finish_reason": finish, "matched_stop": None}],
                              **({} if chat else {"usage": None}))
        if chat or finish is None:
            final = {"index": 0, "delta": {"reasoning_content": None}} if chat else {"index": 0, "text": ""}
            reason = "abort" if live.error else "length"
            yield self._chunk(gen, chat, [final | {"logprobs": None, "finish_reason": reason, "matched_stop": None}],
                              **({} if chat else {"usage": None}))
        if gen.include_usage:
            yield self._chunk(gen, chat, [], usage=self.usage(live, chat))

    async def openai_once(self, gen: Generation, live: LiveRequest, chat: bool) -> dict[str, Any]:
        """The non-streamed completions or chat body."""
        async for _ in counts(live):
            pass
        text = " ".join(self.words(gen, live, 0, live.published))
        finish = "abort" if live.error else "length"
        if chat:
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                                      "logprobs": None, "finish_reason": finish, "matched_stop": None}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "matched_stop": None}
        return {"id": gen.rid, "object": "chat.completion" if chat else "text_completion",
                "created": int(time.time()), "model": self.model_name, "choices": [choice],
                "usage": self.usage(live, chat), "metadata": None}
