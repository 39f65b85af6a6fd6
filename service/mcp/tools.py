"""The tool catalogue: names, descriptions, input types, and strict decoding of arguments.

One catalogue feeds MCP `tools/list`, the OpenAI-style export and argument validation, so every surface
shows the same schema and refuses the same inputs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

MAX_RESULT_CHARS = 12_000  # results stay small enough for an agent's context; the rest is linked


class ToolInputError(ValueError):
    """Arguments that do not decode; the message names the field and how to fix it."""


class ToolResult(msgspec.Struct, kw_only=True):
    """What a tool returns: a short summary, bounded data, and links to the full data.

    Attributes:
        summary: A few lines to read first.
        data: The result, bounded to `MAX_RESULT_CHARS` when encoded.
        links: Where the full data lives (HTTP paths of the service, resource URIs).
        truncated: Whether `data` was cut to fit.
    """

    summary: str
    data: Any = None
    links: dict[str, str] = msgspec.field(default_factory=dict)
    truncated: bool = False


ToolHandler = Callable[[Any], Awaitable[ToolResult]]


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, when to use it, its input type and whether it changes anything."""

    name: str
    description: str
    input_type: type[msgspec.Struct]
    handler: ToolHandler
    writes: bool = False

    def input_schema(self) -> dict[str, Any]:
        """JSON schema of the input, with the root object inlined (MCP wants `type: object` at the root)."""
        return struct_schema(self.input_type)

    def decode(self, arguments: Mapping[str, Any] | None) -> Any:
        """Strictly decode arguments, as the HTTP API decodes a body.

        Raises:
            ToolInputError: naming the field at fault and the fix.
        """
        try:
            return msgspec.convert(dict(arguments or {}), self.input_type, strict=True)
        except msgspec.ValidationError as exc:
            raise ToolInputError(_explain(self, exc)) from exc


def struct_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """msgspec's schema for `struct`, with the `$ref` root replaced by the definition itself."""
    schema = msgspec.json.schema(struct)
    defs: dict[str, Any] = dict(schema.get("$defs", {}))
    root_name = schema["$ref"].rsplit("/", 1)[-1]
    root = dict(defs.pop(root_name))
    root.pop("title", None)
    if defs:
        root["$defs"] = defs
    return root


def _explain(spec: ToolSpec, exc: msgspec.ValidationError) -> str:
    message, _, where = str(exc).partition(" - at `$")
    field = where.rstrip("`").lstrip(".")
    if not field:
        # A root-level message names the field itself: "Object contains unknown field `bogus`".
        field = message.split("`")[1] if message.count("`") >= 2 else "(arguments)"
    known = ", ".join(spec.input_type.__struct_fields__)
    if message.startswith("Object contains unknown field"):
        hint = f"remove it; {spec.name} accepts: {known}"
    elif message.startswith("Object missing required field"):
        hint = f"add it; see the input schema of {spec.name}"
    else:
        hint = f"send a value of the type the input schema of {spec.name} gives for this field"
    return f"invalid argument `{field}`: {message}. Fix: {hint}."


def bounded(data: Any) -> tuple[Any, bool]:
    """Return `data` if it encodes within `MAX_RESULT_CHARS`, else a clipped preview and True."""
    encoded = msgspec.json.encode(data)
    if len(encoded) <= MAX_RESULT_CHARS:
        return msgspec.json.decode(encoded), False
    return {"preview": encoded[:MAX_RESULT_CHARS].decode("utf-8", errors="ignore")}, True
