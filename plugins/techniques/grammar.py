"""Grammar-constrained decoding: backend choice by schema kind, then grammar cache warming."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from plugins.techniques._rules import main_server
from service import Applicability, ConfigDelta, Technique, TuningContext

WARM_SCRIPT = """#!/usr/bin/env bash
# warm_grammar.sh: compile every known JSON schema once at startup so no user request pays the compile.
# Usage: ./warm_grammar.sh [BASE_URL] (schemas/*.json, one schema per file)
set -euo pipefail
BASE_URL="${1:-http://127.0.0.1:30000}"
for schema in schemas/*.json; do
  curl -sf "$BASE_URL/generate" -H "Content-Type: application/json" \\
    -d "$(jq -n --arg s "$(cat "$schema")" '{text: "warmup", sampling_params: {max_new_tokens: 1, json_schema: $s}}')" \\
    > /dev/null
  echo "compiled: $schema"
done
"""


# Casebook case 4, backend table: the backends that support dynamic schemas. outlines' support is
# "Limited": it precomputes the whole FSM, 40 s to 10 min for a complex schema, and cannot express recursion.
DYNAMIC_CAPABLE = ("xgrammar", "llguidance")
KNOWN_BACKENDS = ("xgrammar", "llguidance", "outlines")


def backend_for(ctx: TuningContext) -> str:
    """xgrammar for a finite set of schemas; llguidance when schemas are generated per request.

    Casebook case 4: outlines compiles complex schemas for minutes and cannot do recursion; llguidance
    compiles almost instantly, which matters when every request may bring a new schema.
    """
    return "llguidance" if ctx.scenario.workload.structured_output.dynamic_schemas else "xgrammar"


def running_backend(ctx: TuningContext) -> str | None:
    """The backend that constrains requests sent with a JSON schema: the one set, else SGLang's default,
    xgrammar (`--grammar-backend` defaults to None, which the server resolves to xgrammar in every release
    0.5.2-0.5.23); None while the workload sends no schema (JSON asked for in the prompt only)."""
    out = ctx.scenario.workload.structured_output
    if out.mode != "json_schema":
        return None
    return main_server(ctx.scenario).grammar_backend or "xgrammar"


def unsuitable_backend(ctx: TuningContext) -> str | None:
    """Why the backend the server runs now is ruled out for this workload by the casebook's table, or None.

    No backend set means SGLang's default, xgrammar, which the table accepts for static and dynamic schemas.
    """
    backend = running_backend(ctx)
    out = ctx.scenario.workload.structured_output
    if backend is None:
        return None
    if backend == "none":
        return "the server runs with --grammar-backend none, so nothing constrains the JSON the schemas ask for"
    if backend not in KNOWN_BACKENDS:
        return f"{backend!r} is none of the backends the casebook compares ({', '.join(KNOWN_BACKENDS)})"
    if out.dynamic_schemas and backend not in DYNAMIC_CAPABLE:
        return (f"{backend} compiles each new schema for 40 s to 10 min and cannot handle recursion, and schemas "
                "here are generated per request: only xgrammar or llguidance suit dynamic schemas (case 4 table)")
    return None


class Grammar(Technique):
    """`--grammar-backend` with a JSON schema per request, then a warm-up script for the schema cache."""

    name: ClassVar[str] = "grammar"
    rank: ClassVar[int] = 1
    description: ClassVar[str] = ("Constrained decoding makes malformed JSON impossible (case 4: 3.74% -> 0%); "
                                  "warming the grammar cache moves schema compiles to startup.")

    def applicable(self, ctx: TuningContext) -> Applicability:
        out = ctx.scenario.workload.structured_output
        if out.mode == "none":
            return Applicability(False, "The workload asks for no structured output.")
        backend = running_backend(ctx)
        if backend is None:
            return Applicability(True, "JSON asked for in the prompt fails a few % of requests however the prompt "
                                       "is refined; a grammar backend makes invalid tokens impossible (case 4).")
        unsuitable = unsuitable_backend(ctx)
        if unsuitable is not None:
            return Applicability(True, f"Replace the grammar backend: {unsuitable}; {backend_for(ctx)} instead.")
        named = backend if main_server(ctx.scenario).grammar_backend else f"{backend} (SGLang's default backend)"
        if out.dynamic_schemas:
            return Applicability(False, f"{named} suits dynamic schemas, and schemas generated per request leave "
                                        "no finite set to warm (casebook case 4).")
        if not out.cache_warmed:
            return Applicability(True, f"{out.schemas or 'A finite set of'} schemas compile on first use and "
                                       "drive p99 TTFT up; compile them at startup instead (case 4 round 2).")
        return Applicability(False, f"{named} constrains the schemas and its cache is warmed at startup.")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        workload = ctx.scenario.workload
        out = workload.structured_output
        backend = running_backend(ctx)
        if backend is None:
            chosen = backend_for(ctx)
            schema_mode = msgspec.structs.replace(out, mode="json_schema")
            return [ConfigDelta(technique=self.name, summary=f"grammar backend {chosen} with json_schema",
                                set_server={"grammar_backend": chosen},
                                workload=msgspec.structs.replace(workload, structured_output=schema_mode))]
        if unsuitable_backend(ctx) is not None:
            chosen = backend_for(ctx)
            return [ConfigDelta(technique=self.name, summary=f"grammar backend {backend} -> {chosen}",
                                set_server={"grammar_backend": chosen})]
        if out.dynamic_schemas or out.cache_warmed:
            return []
        warmed = msgspec.structs.replace(out, cache_warmed=True)
        return [ConfigDelta(technique=self.name, summary=f"warm the grammar cache ({out.schemas} schemas"
                                                         f"{_startup_cost(backend, out.schemas)})",
                            workload=msgspec.structs.replace(workload, structured_output=warmed),
                            artifacts={"warm_grammar.sh": WARM_SCRIPT})]


# Casebook case 4's table: outlines compiles a complex schema for 40 s to 10 minutes, on the calling thread; the
# simulator draws a median of 60 s. xgrammar (40-400 ms) and llguidance (almost none) warm in seconds.
OUTLINES_COMPILE_S = 60.0


def _startup_cost(backend: str, schemas: int) -> str:
    """What warming costs at startup where it is more than seconds: outlines compiles one schema at a time for a
    minute or more (`warm_grammar.sh` sends them one after another), so 30 schemas hold a new server about 30 min
    before it should take traffic."""
    if backend != "outlines" or schemas <= 0:
        return ""
    minutes = schemas * OUTLINES_COMPILE_S / 60
    return (f"; on outlines each compiles for 40 s to 10 min, about {minutes:.0f} min before a new server should "
            "take traffic")
