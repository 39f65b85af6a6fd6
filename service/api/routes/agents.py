"""For agents: `/llms.txt` (the API in a page an LLM reads first) and `GET /v1/tools` (function schemas)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from litestar import get

from service.api.auth import SECURITY
from service.api.problems import problem_responses
from service.mcp import ServiceJobs, openai_tool_schemas

LLMS_TXT = """\
# sglang-tuner

> Tunes SGLang serving deployments to an SLO the way the SGLang serving casebook does: profile traffic, plan
> capacity, benchmark, diagnose, then one technique per round (chunked prefill, FP8, speculative decoding,
> TP replicas, router policy, HiCache, ...), each kept or rolled back by its pattern of metric changes.

Authentication: send `Authorization: Bearer <key>` (keys come from `sglang-tuner keys create`). Scopes:
`read` to look, `write` to start or cancel jobs, `admin` for schedules. A service started with `--dev`
on loopback accepts requests from loopback without a key.

Errors are `application/problem+json` with `detail`, the `field` at fault and a `hint` saying what to do
next. Every job response lists `next`: the requests that make sense in the job's current state.

## Tune a deployment

1. `POST /v1/jobs` with `{"playbook": "coding-assistant"}` (optionally `scenario`, `runner`): answers 202 with
   a `Location` header. Send an `Idempotency-Key` header so a retried POST returns the same job.
2. `GET /v1/jobs/{id}?wait=30`: long-poll; answers as soon as the job's state changes (queued, running,
   succeeded, failed, cancelled) or after 30 s. Or follow `GET /v1/jobs/{id}/events` (Server-Sent Events).
3. `GET /v1/jobs/{id}/report`: rounds, decisions and the final launch commands (`?format=markdown|html`);
   `GET /v1/jobs/{id}/frontier`: every deployment measured, its figures, `pareto` and `chosen` flags.
4. `GET /v1/jobs/{id}/rounds`: every round with the policy's verdict and the matched pattern.
5. `POST /v1/jobs/{id}/cancel`: stop a job; the last accepted deployment stays in force.

## Read a benchmark

- `POST /v1/diagnoses` with `{"bench_output": "<bench_serving printed block or JSON line>"}` (optionally
  `metrics`: a /metrics scrape, `scenario`): findings in the casebook's reading order, each with evidence,
  the rule and the technique that addresses it, and `next_technique`.
- `POST /v1/profiles` (multipart: `log`, `tokenizer`): a workload profile from a request log.
- `POST /v1/calculators/kv-per-token`, `kv-capacity`, `threshold-batch`, `required-throughput`: the casebook's
  capacity calculations.

## Catalogue

- `GET /v1/playbooks`, `GET /v1/techniques`, `GET /v1/runners`, `GET /v1/policies`
- `GET /v1/tools`: the same capabilities as OpenAI-style function schemas (`x-writes` marks the ones that need
  the write scope).
- `GET /v1/schedules`: cron re-tuning.
- `/mcp`: the Model Context Protocol server (streamable HTTP) with the same tools, resources and prompts.
- `/schema`: the OpenAPI document (`/schema/openapi.json`); `/schema/swagger` to browse it.
"""


class FunctionSchema(msgspec.Struct, kw_only=True):
    """One tool as a function: its name, when to use it, and the JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


class ToolSchema(msgspec.Struct, kw_only=True):
    """An OpenAI-style tool; `x-writes` is true for tools that start or cancel work (write scope)."""

    type: Literal["function"]
    function: FunctionSchema
    writes: bool = msgspec.field(name="x-writes")


@get("/llms.txt", operation_id="llmsTxt", tags=["agents"], media_type="text/markdown",
     sync_to_thread=False)
def llms_txt() -> str:
    """The API described for LLM agents, in the llms.txt format: what to call, in which order, with what."""
    return LLMS_TXT


@get("/v1/tools", operation_id="listTools", opt={"scope": "read"}, security=SECURITY, tags=["agents"],
     responses=problem_responses(400, 401, 403), sync_to_thread=False)
def list_tools() -> list[ToolSchema]:
    """The MCP server's tools as OpenAI-style function schemas, for agents that do not speak MCP."""
    return msgspec.convert(openai_tool_schemas(ServiceJobs(base_url=None)), list[ToolSchema])


agent_handlers = [llms_txt, list_tools]
