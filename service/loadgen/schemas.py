"""JSON schemas for structured-output benchmarks, and the audit of what came back (casebook case 4).

A workload names how many schemas it uses (`structured_output.schemas`), not the schemas themselves, so the
load generator writes one per schema id: an object of three to six required properties (strings, integers,
numbers, booleans and string enums), no others allowed, the same for the same id on every run. Requests of
a `json_schema` workload carry theirs as SGLang takes it (`sampling_params.json_schema` on `/generate`,
`json_schema` on `/v1/completions`, `response_format` on `/v1/chat/completions`); the prompt of every
structured request names its schema as its last word (`PROMPT_MARKER` and the schema's compact JSON), as a
prompt-only deployment asks for JSON in the prompt.

Every output of a structured request is audited as the casebook's `check_schema.py` audits it: parsed as
JSON, then validated against its schema (jsonschema). A failure is counted by its kind: `parse`, `enum`,
`required` or `type` (the casebook's split), or the validator's name for any other rule broken.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import jsonschema
import numpy as np

# The prompt's last word names the schema the output must follow: `json-schema:{...}` (compact, no spaces).
PROMPT_MARKER = "json-schema:"
SCHEMA_SEED = 60_613
_NAMES = ("id", "name", "kind", "status", "count", "score", "owner", "region", "label", "level", "tag", "total",
          "priority", "active", "source", "target", "amount", "unit", "category", "verified")
_ENUM_VALUES = ("low", "medium", "high", "open", "closed", "pending", "red", "green", "blue", "north", "south")
_TYPES = ("string", "integer", "number", "boolean", "enum")


@lru_cache(maxsize=4096)
def _schema_text(schema_id: int) -> str:
    rng = np.random.default_rng([SCHEMA_SEED, schema_id])
    count = int(rng.integers(3, 7))
    names = [str(n) for n in rng.choice(_NAMES, size=count, replace=False)]
    properties: dict[str, Any] = {names[0]: {"type": "string"}}  # one free-text field in every schema
    for name in names[1:]:
        kind = str(rng.choice(_TYPES))
        if kind == "enum":
            values = [str(v) for v in rng.choice(_ENUM_VALUES, size=int(rng.integers(2, 5)), replace=False)]
            properties[name] = {"type": "string", "enum": values}
        else:
            properties[name] = {"type": kind}
    schema = {"title": f"schema-{schema_id}", "type": "object", "properties": properties, "required": names,
              "additionalProperties": False}
    return json.dumps(schema, separators=(",", ":"))


def schema_for(schema_id: int) -> dict[str, Any]:
    """The JSON schema of `schema_id` (a fresh copy: callers may not change the cached one)."""
    result: dict[str, Any] = json.loads(_schema_text(schema_id))
    return result


def schema_text(schema_id: int) -> str:
    """The schema of `schema_id` as compact JSON, as the request and the prompt carry it."""
    return _schema_text(schema_id)


def prompt_schema(prompt: str) -> dict[str, Any] | None:
    """The schema a prompt asks its output to follow (its last word), or None when it asks for no JSON."""
    last = prompt.rsplit(maxsplit=1)[-1:]  # only the last word: prompts run to thousands of words
    if not last or not last[0].startswith(PROMPT_MARKER):
        return None
    try:
        schema = json.loads(last[0][len(PROMPT_MARKER):])
    except ValueError:
        return None
    return schema if isinstance(schema, dict) else None


@lru_cache(maxsize=4096)
def _validator(text: str) -> jsonschema.protocols.Validator:
    schema = json.loads(text)
    cls = jsonschema.validators.validator_for(schema)
    validator: jsonschema.protocols.Validator = cls(schema)
    return validator


def audit(output: str, schema_id: int) -> str:
    """Why `output` fails schema `schema_id` (`parse`, `enum`, `required`, `type`, ...), or "" when it is valid."""
    try:
        document = json.loads(output)
    except ValueError:
        return "parse"
    error = jsonschema.exceptions.best_match(_validator(_schema_text(schema_id)).iter_errors(document))
    if error is None:
        return ""
    return str(error.validator)
