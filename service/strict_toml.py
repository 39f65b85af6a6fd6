"""Strict TOML decoding into msgspec Structs, with errors that name the file, the line and the fix.

Unknown keys are errors naming the nearest valid key; type errors name the field. Scenario files and
playbooks both decode through here, so every input file fails the same readable way.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from difflib import get_close_matches
from pathlib import Path
from typing import Any, TypeVar

import msgspec
from msgspec import inspect as mi

T = TypeVar("T")
PathPart = str | int

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-]+))*)\s*=""")
_MSGSPEC_PATH = re.compile(r"at `\$([^`]*)`")


class InputFileError(ValueError):
    """A file that does not decode: carries the file, the line, the dotted field and a hint."""

    def __init__(self, message: str, *, file: str, line: int | None, field: str | None, hint: str | None) -> None:
        self.message, self.file, self.line, self.field, self.hint = message, file, line, field, hint
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {message}" + (f" ({hint})" if hint else ""))


def decode_file(path: Path, type_: type[T], *, known_flag: Callable[[str], bool | str] | None = None) -> T:
    """Read and strictly decode a TOML file into `type_`."""
    return decode_text(path.read_text(encoding="utf-8"), type_, source=str(path), known_flag=known_flag)


def decode_text(text: str, type_: type[T], *, source: str = "<string>",
                known_flag: Callable[[str], bool | str] | None = None) -> T:
    """Strictly decode TOML text into `type_`: syntax, unknown keys, then types."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = _line_from_toml_error(str(exc))
        raise InputFileError(f"not valid TOML: {exc}", file=source, line=line, field=None,
                             hint="check quoting and brackets on that line") from exc
    return decode_data(data, type_, text=text, source=source, known_flag=known_flag)


def decode_data(data: Any, type_: type[T], *, text: str = "", source: str = "<data>",
                known_flag: Callable[[str], bool | str] | None = None) -> T:
    """Strictly convert already-parsed data (e.g. a JSON request body) into `type_`.

    `known_flag` says whether a spelling ("--disable-cuda-graph") is a real launch flag: an unknown key of a
    table with `extra` that is one is pointed to `extra` even where a table key lies near it. A string answer
    is the fix for a flag one of the table's own keys sets ("--enable-dp-attention" is `attention-dp-size`).
    """
    problem = find_unknown_key(data, mi.type_info(type_), [])
    if problem is not None:
        path, key, valid = problem
        near = get_close_matches(key, valid, n=1, cutoff=0.5)
        where = dotted(path) or "the top level"
        hint = f"did you mean `{near[0]}`?" if near else f"valid keys: {', '.join(sorted(valid))}"
        flag = "--" + str(key).lstrip("-").replace("_", "-")
        known = known_flag(flag) if known_flag is not None and "extra" in valid else False
        if isinstance(known, str):
            hint = known
        elif "extra" in valid and (not near or known):
            # A server table models the flags the tuner reads; every other SGLang flag is passed through `extra`
            # (a near key is a guess: `disable-cuda-graph` is a real flag, not a misspelt `disable-radix-cache`).
            shown = _flag_value(_at(data, [*path, key]))
            hint += (f" {flag} is an SGLang flag: it goes" if near else "; any other SGLang flag goes")
            hint += (f" under `extra`, keyed by the flag as it is typed: \"{flag}\""
                     + (f" = {shown}" if shown is not None else ""))
        raise InputFileError(f"unknown key `{key}` in {where}", file=source, line=locate(text, [*path, key]),
                             field=dotted([*path, key]), hint=hint)
    try:
        return msgspec.convert(data, type_, strict=False)
    except msgspec.ValidationError as exc:
        path = parse_msgspec_path(str(exc))
        message = str(exc).split(" - at ")[0]
        raise InputFileError(f"{message} at `{dotted(path)}`", file=source, line=locate(text, path),
                             field=dotted(path), hint=_value_hint(type_, path, data, message)) from exc


def _value_hint(type_: Any, path: list[PathPart], data: Any, message: str) -> str:
    """The fix for a value msgspec refused: the values a choice field takes (and the nearest one), else the
    generic advice. `mode = "constrained"` -> "valid values: none, prompt_only, json_schema"."""
    if missing := re.match(r"Object missing required field `([^`]+)`", message):
        return f"add `{missing.group(1)}` to it"
    choices = _choices(_field_type(mi.type_info(type_), path, data))
    if not choices:
        return "fix the value's type or range"
    given = _at_or_none(data, path)
    near = get_close_matches(str(given), [str(c) for c in choices], n=1, cutoff=0.5) if given is not None else []
    shown = ", ".join(json.dumps(c) if isinstance(c, str) else repr(c) for c in choices)
    return (f"did you mean {json.dumps(near[0])}? " if near else "") + f"valid values: {shown}"


def _field_type(info: mi.Type, path: list[PathPart], data: Any) -> mi.Type | None:
    """The declared type at `path` (through structs, lists and dicts), or None where the path leaves it."""
    for part in path:
        info = _unwrap(info, data)
        if isinstance(info, mi.StructType) and isinstance(part, str):
            field = next((f for f in info.fields if f.encode_name == part), None)
            if field is None:
                return None
            info, data = field.type, data.get(part) if isinstance(data, dict) else None
        elif isinstance(info, mi.ListType | mi.VarTupleType) and isinstance(part, int):
            info = info.item_type
            data = data[part] if isinstance(data, list) and part < len(data) else None
        elif isinstance(info, mi.DictType):
            info, data = info.value_type, data.get(part) if isinstance(data, dict) else None
        else:
            return None
    return info


def _choices(info: mi.Type | None) -> list[Any]:
    """The values a Literal or Enum field accepts (an optional one's too), else []."""
    if isinstance(info, mi.UnionType):
        return [value for member in info.types for value in _choices(member)]
    if isinstance(info, mi.LiteralType):
        return list(info.values)
    if isinstance(info, mi.EnumType):
        return [member.value for member in info.cls]
    return []


def _at_or_none(data: Any, path: list[PathPart]) -> Any:
    try:
        return _at(data, path)
    except (KeyError, IndexError, TypeError):
        return None


def _flag_value(value: Any) -> str | None:
    """A flag value as TOML writes it (a string, number or boolean); None for anything a flag cannot take."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: the same quotes and escapes
    return None


def _at(data: Any, path: list[PathPart]) -> Any:
    for part in path:
        data = data[part]
    return data


def find_unknown_key(data: Any, info: mi.Type, path: list[PathPart]) -> tuple[list[PathPart], str, list[str]] | None:
    """First key in `data` that `info` does not accept, as (path, key, valid keys), or None."""
    info = _unwrap(info, data)
    if isinstance(info, mi.StructType) and isinstance(data, dict):
        fields = {f.encode_name: f for f in info.fields}
        for key, value in data.items():
            if key not in fields:
                return path, str(key), list(fields)
            found = find_unknown_key(value, fields[key].type, [*path, key])
            if found:
                return found
    elif isinstance(info, mi.ListType | mi.VarTupleType) and isinstance(data, list):
        for index, item in enumerate(data):
            found = find_unknown_key(item, info.item_type, [*path, index])
            if found:
                return found
    return None


def _unwrap(info: mi.Type, data: Any) -> mi.Type:
    if isinstance(info, mi.UnionType):
        for member in info.types:
            if isinstance(member, mi.StructType) and isinstance(data, dict):
                return member
            if isinstance(member, mi.ListType) and isinstance(data, list):
                return member
    return info


def parse_msgspec_path(message: str) -> list[PathPart]:
    """`$.deployment.groups[0].replicas` in a msgspec error -> ['deployment', 'groups', 0, 'replicas']."""
    match = _MSGSPEC_PATH.search(message)
    if not match:
        return []
    parts: list[PathPart] = []
    for token in re.findall(r"\.([^.\[]+)|\[(\d+)\]|\[\"([^\"]+)\"\]", match.group(1)):
        name, index, quoted = token
        parts.append(int(index) if index else (name or quoted))
    return parts


def dotted(path: list[PathPart]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def locate(text: str, path: list[PathPart]) -> int | None:
    """Best-effort line number (1-based) of `path` in TOML `text`: the key's line, else its table's."""
    if not text or not path:
        return None
    table: list[PathPart] = []
    counters: dict[tuple[PathPart, ...], int] = {}
    best: tuple[int, int] | None = None  # (matched prefix length, line)
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            keys = _split_key(header.group(2))
            if header.group(1) == "[[":
                base = tuple(_with_indexes(keys[:-1], counters)) + (keys[-1],)
                counters[base] = counters.get(base, -1) + 1
                table = [*base, counters[base]]
            else:
                table = _with_indexes(keys, counters)
            best = _better(best, _prefix_len(table, path), number)
            continue
        key = _KEY.match(line)
        if key:
            full = [*table, *_split_key(key.group(1))]
            best = _better(best, _prefix_len(full, path), number)
            inline = line.split("=", 1)[1]
            for depth in range(len(full), len(path)):
                if re.search(rf"(^|[{{,\s]){re.escape(str(path[depth]))}\s*=", inline) and path[:len(full)] == full:
                    best = _better(best, depth + 1, number)
    return best[1] if best and best[0] > 0 else None


def _with_indexes(keys: list[str], counters: dict[tuple[PathPart, ...], int]) -> list[PathPart]:
    """Expand a table path through the current element of each array of tables it passes."""
    out: list[PathPart] = []
    for key in keys:
        out.append(key)
        current = counters.get(tuple(out))
        if current is not None:
            out.append(current)
    return out


def _split_key(raw: str) -> list[str]:
    return [part.strip().strip("\"'") for part in re.findall(r"\"[^\"]*\"|'[^']*'|[^.]+", raw)]


def _prefix_len(candidate: list[PathPart], path: list[PathPart]) -> int:
    if len(candidate) > len(path) or path[:len(candidate)] != candidate:
        return 0
    return len(candidate)


def _better(best: tuple[int, int] | None, length: int, line: int) -> tuple[int, int] | None:
    if length and (best is None or length > best[0]):
        return (length, line)
    return best


def _line_from_toml_error(message: str) -> int | None:
    match = re.search(r"line (\d+)", message)
    return int(match.group(1)) if match else None
