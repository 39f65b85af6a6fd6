"""Request-log lines: what `sglang-tuner profile` accepts.

One JSON object per line. The prompt is `prompt` or `input` (a string), or `messages` (OpenAI chat style:
a list of `{"role", "content"}` where content is a string or a list of `{"type": "text", "text"}` parts).
The completion is `completion`, `output` or `response` (a string, or an OpenAI response object with
`choices[0].text` or `choices[0].message.content`); for `messages` without one, a final assistant message is
the completion. Messages are rendered in ChatML, or by the model's own chat template when one is given
(`service.profile.chat_template`). Timing is optional: the start is `timestamp`, `ts` or `start_time`, the end is `end_time` or
the start plus `latency` (seconds); times are epoch seconds or ISO 8601 strings (naive ones read as UTC).
Blank lines are ignored; any other line that does not fit is malformed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

PROMPT_KEYS = ("prompt", "input")
COMPLETION_KEYS = ("completion", "output", "response")
START_KEYS = ("timestamp", "ts", "start_time")


class MalformedLine(ValueError):
    """A log line that cannot be profiled; the message names the line."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


class LogRecord(msgspec.Struct, frozen=True):
    """One request from the log: prompt text as pieces (their concatenation), completion and timing."""

    line: int
    prompt_pieces: list[str]
    completion: str
    start: float | None = None
    end: float | None = None
    templated: bool = False  # rendered by the model's chat template: tokenized without added tokens


# Renders (role, content) messages as prompt pieces; raises ValueError for a conversation it refuses.
ChatRenderer = Callable[[list[tuple[str, str]]], list[str]]


def render_message(role: str, content: str) -> str:
    """One chat message in ChatML, so role markers land on the tokenizer's special tokens where it has them."""
    return "".join(message_pieces(role, content))


def message_pieces(role: str, content: str) -> list[str]:
    """A ChatML message as header, content and footer, so the tokenizer may reuse the content's tokens."""
    return [f"<|im_start|>{role}\n", content, MESSAGE_END]


MESSAGE_END = "<|im_end|>\n"
GENERATION_PROMPT = "<|im_start|>assistant\n"


def parse_line(line: int, raw: bytes, chat: ChatRenderer | None = None) -> LogRecord | None:
    """Parse one log line; None for a blank line. `chat` renders messages (ChatML when None).

    Raises:
        MalformedLine: When the line is not a JSON object with a prompt, a completion and valid times.
    """
    if not raw.strip():
        return None
    try:
        typed = _TYPED_LINE.decode(raw)
    except msgspec.DecodeError:  # also a type mismatch; the general path names the problem
        typed = None
    record = _typed_record(line, typed, chat) if typed is not None else None
    return record if record is not None else _general_record(line, raw, chat)


def _general_record(line: int, raw: bytes, chat: ChatRenderer | None = None) -> LogRecord:
    try:
        obj = msgspec.json.decode(raw)
    except msgspec.DecodeError as err:
        raise MalformedLine(line, f"not valid JSON ({err})") from None
    if not isinstance(obj, dict):
        raise MalformedLine(line, "not a JSON object")
    pieces, trailing_answer, templated = _prompt_pieces(line, obj, chat)
    completion = _completion(line, obj, trailing_answer)
    start, end = _times(line, obj)
    return LogRecord(line, pieces, completion, start, end, templated)


class _TypedMessage(msgspec.Struct):
    role: str
    content: str | None = None  # text parts take the general path


Time = float | str | None | UnsetType
Completion = str | dict[str, Any] | UnsetType


class _TypedLine(msgspec.Struct):
    """The common shapes of a line, decoded without building dicts; anything else takes the general path."""

    prompt: str | UnsetType = UNSET
    input: str | UnsetType = UNSET
    messages: list[_TypedMessage] | UnsetType = UNSET
    completion: Completion = UNSET
    output: Completion = UNSET
    response: Completion = UNSET
    timestamp: Time = UNSET
    ts: Time = UNSET
    start_time: Time = UNSET
    end_time: Time = UNSET
    latency: float | None | UnsetType = UNSET


_TYPED_LINE = msgspec.json.Decoder(_TypedLine)


def _typed_record(line: int, obj: _TypedLine, chat: ChatRenderer | None) -> LogRecord | None:
    """The record the general path would build, or None when the line needs the general path."""
    completions = [c for c in (obj.completion, obj.output, obj.response) if c is not UNSET]
    answer = None
    templated = False
    prompt = obj.prompt if obj.prompt is not UNSET else obj.input
    if prompt is not UNSET:
        pieces = [prompt]
    elif obj.messages:
        turns = [(m.role, m.content or "") for m in obj.messages]
        if turns[-1][0] == "assistant" and not completions:
            answer = turns.pop()[1]
        pieces, templated = _rendered(line, turns, chat), chat is not None
    else:
        return None
    completion = _completion_text(completions[0]) if completions else answer
    if completion is None:
        return None
    start_key = next((k for k in START_KEYS if getattr(obj, k) not in (None, UNSET)), None)
    if start_key is None:
        return LogRecord(line, pieces, completion, templated=templated)
    start = _instant(line, start_key, getattr(obj, start_key))
    end = None
    if obj.end_time not in (None, UNSET):
        end = _instant(line, "end_time", obj.end_time)
    elif obj.latency not in (None, UNSET):
        end = start + obj.latency
    if end is not None and end < start:
        raise MalformedLine(line, "the request ends before it starts")
    return LogRecord(line, pieces, completion, start, end, templated)


def _prompt_pieces(line: int, obj: dict[str, Any], chat: ChatRenderer | None) -> tuple[list[str], str | None, bool]:
    for key in PROMPT_KEYS:
        if key in obj:
            if not isinstance(obj[key], str):
                raise MalformedLine(line, f"`{key}` is not a string")
            return [obj[key]], None, False
    messages = obj.get("messages")
    if messages is None:
        raise MalformedLine(line, "no `prompt`, `input` or `messages`")
    if not isinstance(messages, list) or not messages:
        raise MalformedLine(line, "`messages` is not a non-empty list")
    turns = [_message(line, i, m) for i, m in enumerate(messages)]
    answer = None
    if turns[-1][0] == "assistant" and not any(k in obj for k in COMPLETION_KEYS):
        answer = turns.pop()[1]
    return _rendered(line, turns, chat), answer, chat is not None


def _rendered(line: int, turns: list[tuple[str, str]], chat: ChatRenderer | None) -> list[str]:
    if chat is None:
        return chat_pieces(turns)
    try:
        return chat(turns)
    except ValueError as err:
        raise MalformedLine(line, str(err)) from None


def chat_pieces(turns: list[tuple[str, str]]) -> list[str]:
    """A ChatML prompt as alternating markup and message contents, ending with the generation prompt.

    The markup between two contents (one message's footer and the next one's header) is a single piece, so
    a long conversation is few pieces; the text is that of `render_message` over the turns.
    """
    pieces: list[str] = []
    after = ""
    for role, content in turns:
        pieces += [_header(after, role), content]
        after = MESSAGE_END
    pieces.append(after + GENERATION_PROMPT)
    return pieces


@lru_cache(maxsize=256)
def _header(after: str, role: str) -> str:
    # One shared string per role keeps a resent conversation's markup pieces identical objects.
    return f"{after}<|im_start|>{role}\n"


def _message(line: int, index: int, message: Any) -> tuple[str, str]:
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise MalformedLine(line, f"messages[{index}] has no `role`")
    content = message.get("content")
    if content is None:
        return message["role"], ""
    if isinstance(content, str):
        return message["role"], content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        strings = [t for t in texts if isinstance(t, str)]
        if len(strings) == len(texts):
            return message["role"], "".join(strings)
    raise MalformedLine(line, f"messages[{index}].content is neither a string nor text parts")


def _completion(line: int, obj: dict[str, Any], trailing_answer: str | None) -> str:
    for key in COMPLETION_KEYS:
        if key in obj:
            text = _completion_text(obj[key])
            if text is None:
                raise MalformedLine(line, f"`{key}` is neither a string nor an OpenAI response")
            return text
    if trailing_answer is not None:
        return trailing_answer
    raise MalformedLine(line, "no `completion`, `output` or `response`")


def _completion_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("choices"), list) and value["choices"]:
        choice = value["choices"][0]
        if isinstance(choice, dict):
            if isinstance(choice.get("text"), str):
                return str(choice["text"])
            message = choice.get("message")
            if isinstance(message, dict) and isinstance(message.get("content"), str):
                return str(message["content"])
    return None


def _times(line: int, obj: dict[str, Any]) -> tuple[float | None, float | None]:
    start_key = next((k for k in START_KEYS if obj.get(k) is not None), None)
    if start_key is None:
        return None, None
    start = _instant(line, start_key, obj[start_key])
    end = None
    if obj.get("end_time") is not None:
        end = _instant(line, "end_time", obj["end_time"])
    elif obj.get("latency") is not None:
        latency = obj["latency"]
        if isinstance(latency, bool) or not isinstance(latency, int | float):
            raise MalformedLine(line, "`latency` is not a number of seconds")
        end = start + float(latency)
    if end is not None and end < start:
        raise MalformedLine(line, "the request ends before it starts")
    return start, end


def _instant(line: int, key: str, value: Any) -> float:
    if isinstance(value, bool):
        raise MalformedLine(line, f"`{key}` is not a time")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise MalformedLine(line, f"`{key}` is neither epoch seconds nor ISO 8601: {value!r}") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    raise MalformedLine(line, f"`{key}` is not a time")
