"""What a JSON request body, a query string and a path may hold, checked before anything decodes them.

A body nested thousands of levels deep exhausts the interpreter's recursion limit in the decoder, bytes
that are not UTF-8 fail in whatever decodes them first, and a NUL character is refused by PostgreSQL's text
types mid-transaction. Each is refused here, up front, as a 400 naming the limit and the field.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote_to_bytes

import msgspec
import numpy as np

MAX_JSON_DEPTH = 64  # a scenario with an inline trace nests 7 levels; a schedule adds 2

# A JSON string literal (escapes included), and the brackets that nest.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# An escaped NUL: `\u0000` after an even number of backslashes (`\\u0000` is the text "\u0000").
_ESCAPED_NUL = re.compile(rb"(?:^|[^\\])(?:\\\\)*\\u0000")
_NESTING = np.zeros(256, dtype=np.int8)
_NESTING[[ord("["), ord("{")]] = 1
_NESTING[[ord("]"), ord("}")]] = -1


class InputRefused(ValueError):
    """An input beyond a limit: which field (or `body`, `path`, a query parameter) and what to send instead."""

    def __init__(self, field: str, detail: str, hint: str) -> None:
        super().__init__(detail)
        self.field, self.detail, self.hint = field, detail, hint


def check_json_body(body: bytes, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Refuse a body that is not UTF-8, nests deeper than `max_depth`, or holds a NUL character.

    Malformed JSON passes: the decoder reports it with its position.

    Raises:
        InputRefused: naming the limit, and the field holding a NUL.
    """
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputRefused("body", f"the body is not UTF-8 (byte {exc.start}: {body[exc.start:exc.start + 1]!r})",
                           "send JSON encoded as UTF-8") from exc
    depth = json_depth(body)
    if depth > max_depth:
        raise InputRefused("body", f"the body nests {depth} levels deep; the limit is {max_depth}",
                           "send objects and arrays nested at most "
                           f"{max_depth} levels (a job request nests fewer than 10)")
    if b"\x00" in body or _ESCAPED_NUL.search(body):
        raise InputRefused(_nul_field(body), "a NUL character (\\u0000) is not allowed in any text",
                           "remove the NUL character from the field")


def json_depth(body: bytes) -> int:
    """How deep the arrays and objects of a JSON text nest (brackets inside strings do not count)."""
    brackets = _STRING.sub(b"", body)
    if not brackets:
        return 0
    steps = _NESTING[np.frombuffer(brackets, dtype=np.uint8)]
    return int(np.cumsum(steps, dtype=np.int64).max(initial=0))


def _nul_field(body: bytes) -> str:
    """The dotted path of the first value or key holding a NUL (`body` when the text is not JSON)."""
    try:
        value = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return "body"
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, str) and "\x00" in item:
            return path or "body"
        if isinstance(item, dict):
            for key, child in item.items():
                if "\x00" in key:
                    return f"{path}.{key!r}".lstrip(".")
                pending.append((f"{path}.{key}".lstrip("."), child))
        elif isinstance(item, list):
            pending.extend((f"{path}[{index}]", child) for index, child in enumerate(item))
    return "body"


def check_query_string(query: bytes) -> None:
    """Refuse query parameters whose names or values, percent-decoded, are not UTF-8 or hold a NUL.

    Raises:
        InputRefused: naming the parameter.
    """
    for pair in query.split(b"&"):
        raw_name, _, raw_value = pair.partition(b"=")
        name = unquote_to_bytes(raw_name.replace(b"+", b" "))
        value = unquote_to_bytes(raw_value.replace(b"+", b" "))
        field = name.decode("utf-8", errors="replace") or "query"
        for part in (name, value):
            try:
                text = part.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputRefused(field, f"query parameter {field!r} is not UTF-8 once percent-decoded",
                                   "percent-encode UTF-8 bytes only") from exc
            if "\x00" in text:
                raise InputRefused(field, f"query parameter {field!r} holds a NUL character (%00)",
                                   "remove the NUL character")


def check_path(path: str) -> None:
    """Refuse a request path holding a NUL or bytes that were not UTF-8 (ids are plain text).

    Raises:
        InputRefused: naming the path.
    """
    try:
        path.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputRefused("path", "the path is not UTF-8 once percent-decoded",
                           "ids are the ASCII strings the service returned") from exc
    if "\x00" in path:
        raise InputRefused("path", "the path holds a NUL character (%00)",
                           "ids are the ASCII strings the service returned")
