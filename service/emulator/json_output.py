"""What the emulated model writes for a structured-output request: JSON for its schema, token by token.

A request that carries a JSON schema (SGLang's `json_schema` sampling parameter, or `response_format`) is
decoded under the grammar: its output always follows the schema. A request whose prompt only asks for JSON
(its last word names the schema, `service.loadgen.schemas`) gets what a model writes without a grammar:
valid JSON, except for a share of requests (`SGLANG_TUNER_EMULATOR_JSON_FAILURE_RATE`, the workload's
`prompt_only_failure_rate`) split by the casebook's failure kinds (case 4: parse 87, enum 61, required 28,
type 11 of 187). Decoding is greedy, so the same prompt fails the same way in every round.

Each token is one whitespace-free piece of the document (`{`, `"name":`, a word of a string, `,`, `}`);
pieces joined by spaces are the document, and its free-text field takes as many words as fill the request's
`max_new_tokens` (a schema without one is followed by whitespace tokens). A request allowed fewer tokens than the smallest document gets the document cut short,
as a real model's output is.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from service.domain import StructuredOutput
from service.simulator.grammar import FAILURE_KINDS

# The workload default: casebook case 4, round 0, 187 of 5,000 prompt-only outputs invalid.
DEFAULT_FAILURE_RATE = StructuredOutput().prompt_only_failure_rate
_WORDS = ("alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta", "lambda", "zeta")
_SCALARS = {"integer": "42", "number": "3.5", "boolean": "true"}


def failure_kind(prompt_ids: list[int], seed: int, rate: float) -> str:
    """How a prompt-only output of this prompt fails (`parse`, `enum`, `required`, `type`), or "" when valid."""
    rng = np.random.default_rng([seed & 0xFFFF_FFFF, zlib.crc32(np.asarray(prompt_ids, dtype=np.int64).tobytes())])
    if rng.random() >= rate:
        return ""
    kinds = list(FAILURE_KINDS)
    return str(kinds[int(rng.choice(len(kinds), p=[FAILURE_KINDS[k] for k in kinds]))])


def _value(spec: dict[str, Any]) -> list[str]:
    if "enum" in spec:
        return [f'"{spec["enum"][0]}"']
    return [_SCALARS[spec["type"]]] if spec.get("type") in _SCALARS else ['"text"']


def document_pieces(schema: dict[str, Any], tokens: int, fault: str = "") -> list[str]:
    """The `tokens` pieces of a document for `schema`, broken as `fault` says ("" for a valid one)."""
    properties: dict[str, dict[str, Any]] = dict(schema.get("properties") or {})
    names = list(properties)
    free = next((n for n in names if properties[n].get("type") == "string" and "enum" not in properties[n]), None)
    values = {name: _value(spec) for name, spec in properties.items()}
    enums = [n for n in names if "enum" in properties[n]]
    if fault == "enum" and not enums:
        fault = "type"
    if fault == "enum":
        values[enums[-1]] = ['"unknown"']
    elif fault == "type" and names:
        target = names[-1] if names[-1] != free or len(names) == 1 else names[-2]
        values[target] = ["7"] if properties[target].get("type") in ("string", None) or "enum" in properties[target] \
            else ['"seven"']
    elif fault == "required" and len(names) > 1:
        names = [n for n in names if n != (names[-1] if names[-1] != free else names[-2])]
    head, tail = ["{"], [] if fault == "parse" else ["}"]
    body: list[list[str]] = [[f'"{name}":', *values[name]] for name in names]
    base = 1 + sum(len(b) for b in body) + max(len(body) - 1, 0) + len(tail)
    room = tokens - base
    if free is not None and free in names and room > 0:
        words = ["text"] + [_WORDS[i % len(_WORDS)] for i in range(room)]
        body[names.index(free)][1:] = [f'"{words[0]}', *words[1:-1], f'{words[-1]}"']
    pieces = head[:]
    for k, part in enumerate(body):
        pieces += part if k == len(body) - 1 else [*part, ","]
    pieces += tail
    # No free-text field to fill: the rest are whitespace tokens after the document, which JSON allows.
    return (pieces + [""] * max(tokens - len(pieces), 0))[:tokens]
