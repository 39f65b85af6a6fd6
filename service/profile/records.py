"""Request-log lines: what `sglang-tuner profile` accepts.

One JSON object per line. The prompt is `prompt` or `input` (a string), or `messages` (OpenAI chat style:
a list of `{"role", "content"}` where content is a string or a list of `{"type": "text", "text"}` parts).
The completion is `completion`, `output` or `response` (a string, or an OpenAI response object with
`choices[0].text` or `choices[0].message.content`); for `messages` without one, a final assistant message is
the completion. Timing is optional: the start is `timestamp`, `ts` or `start_time`, the end is `end_time` or
the start plus `latency` (seconds); times are epoch seconds or ISO 8601 strings (naive ones read as UTC).
Blank lines are ignored; any other line that does not fit is malformed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

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


def render_message(role: str, content: str) -> str:
    """One chat message in ChatML, so role markers land on the tokenizer's special tokens where it has them."""
    return "".join(message_pieces(role, content))


def message_pieces(role: str, content: str) -> list[str]:
    """A ChatML message as header, content and footer, so the tokenizer may reuse the content's tokens."""
    return [f"<|im_start|>{role}\n", content, "<|im_end|>\n"]


GENERATION_PROMPT = "<|im_start|>assistant\n"


def parse_line(line: int, raw: bytes) -> LogRecord | None:
    """Parse one log line; None for a blank line.

    Raises:
        MalformedLine: When the line is not a JSON object with a prompt, a completion and valid times.
    """
    if not raw.strip():
        return None
    try:
        obj = msgspec.json.decode(raw)
    except msgspec.DecodeError as err:
        raise MalformedLine(line, f"not valid JSON ({err})") from None
    if not isinstance(obj, dict):
        raise MalformedLine(line, "not a JSON object")
    pieces, trailing_answer = _prompt_pieces(line, obj)
    completion = _completion(line, obj, trailing_answer)
    start, end = _times(line, obj)
    return LogRecord(line, pieces, completion, start, end)


def _prompt_pieces(line: int, obj: dict[str, Any]) -> tuple[list[str], str | None]:
    for key in PROMPT_KEYS:
        if key in obj:
            if not isinstance(obj[key], str):
                raise MalformedLine(line, f"`{key}` is not a string")
            return [obj[key]], None
    messages = obj.get("messages")
    if messages is None:
        raise MalformedLine(line, "no `prompt`, `input` or `messages`")
    if not isinstance(messages, list) or not messages:
        raise MalformedLine(line, "`messages` is not a non-empty list")
    turns = [_message(line, i, m) for i, m in enumerate(messages)]
    answer = None
    if turns[-1][0] == "assistant" and not any(k in obj for k in COMPLETION_KEYS):
        answer = turns.pop()[1]
    pieces = [piece for role, content in turns for piece in message_pieces(role, content)]
    return [*pieces, GENERATION_PROMPT], answer


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
        if all(isinstance(t, str) for t in texts):
            return message["role"], "".join(texts)  # type: ignore[arg-type]
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
