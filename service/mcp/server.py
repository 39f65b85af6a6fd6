"""The MCP server: the tool catalogue, resources and prompts on the SDK's low-level `Server`.

The low-level server is used (not FastMCP) so each tool's input schema is exactly the msgspec-derived one
and arguments are decoded by msgspec as strictly as the HTTP API decodes bodies.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import mcp_types as types
import msgspec
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from service.mcp.catalogue import tool_catalogue
from service.mcp.job_tools import ServiceJobs
from service.mcp.prompts import PROMPTS, prompt_named
from service.mcp.resources import read_resource, resource_entries
from service.mcp.tools import ToolInputError, ToolResult, ToolSpec

WriteCheck = Callable[[], bool]
INSTRUCTIONS = (
    "sglang-tuner tunes SGLang serving deployments the way the SGLang serving casebook does: profile traffic, "
    "plan capacity, benchmark, diagnose, then one technique per round, kept or rolled back by the metric-change "
    "pattern. Start with diagnose_benchmark for a bad benchmark, or the 'tune my deployment' prompt."
)


def _version() -> str:
    try:
        return version("sglang-tuner")
    except PackageNotFoundError:
        return "0"


def build_server(jobs: ServiceJobs | None = None, *, write_allowed: WriteCheck | None = None) -> Server[Any]:
    """Build the MCP server.

    Args:
        jobs: Where job tools send their requests (default: the service named by SGLANG_TUNER_URL).
        write_allowed: Called before a tool that starts or cancels work; False refuses the call. The HTTP
            transport passes a check of the caller's bearer-token scopes; stdio runs as the local user.
    """
    specs = {spec.name: spec for spec in tool_catalogue(jobs)}

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(spec) for spec in specs.values()])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        spec = specs.get(params.name)
        if spec is None:
            return _error(f"unknown tool {params.name!r}; tools/list shows: {', '.join(specs)}")
        if spec.writes and write_allowed is not None and not write_allowed():
            return _error(f"{spec.name} starts or cancels work and needs a write-scoped credential: send "
                          "`Authorization: Bearer <key with the write scope>`.")
        try:
            result = await spec.handler(spec.decode(params.arguments))
        except ToolInputError as exc:
            return _error(str(exc))
        return _success(result)

    return Server(
        "sglang-tuner", version=_version(), instructions=INSTRUCTIONS,
        on_list_tools=list_tools, on_call_tool=call_tool,
        on_list_resources=_list_resources, on_read_resource=_read_resource,
        on_list_prompts=_list_prompts, on_get_prompt=_get_prompt,
    )


def _tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name, description=spec.description, input_schema=spec.input_schema(),
        annotations=types.ToolAnnotations(read_only_hint=not spec.writes, destructive_hint=spec.writes,
                                          idempotent_hint=not spec.writes),
    )


def _success(result: ToolResult) -> types.CallToolResult:
    body = msgspec.to_builtins(result)
    text = result.summary + "\n\n" + msgspec.json.encode(body).decode()
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=body)


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


async def _list_resources(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
                          ) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[
        types.Resource(uri=e.uri, name=e.name, description=e.description, mime_type=e.mime_type)
        for e in resource_entries()
    ])


async def _read_resource(ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
                         ) -> types.ReadResourceResult:
    uri = str(params.uri)
    text = read_resource(uri)
    mime = next((e.mime_type for e in resource_entries() if e.uri == uri), "text/plain")
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=text, mime_type=mime)])


async def _list_prompts(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
                        ) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[
        types.Prompt(name=p.name, description=p.description, arguments=[
            types.PromptArgument(name=n, description=d, required=r) for n, d, r in p.arguments])
        for p in PROMPTS
    ])


async def _get_prompt(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
                      ) -> types.GetPromptResult:
    prompt = prompt_named(params.name)
    text = prompt.render(dict(params.arguments or {}))
    return types.GetPromptResult(description=prompt.description, messages=[
        types.PromptMessage(role="user", content=types.TextContent(text=text))])


async def run_stdio() -> None:
    """Serve the MCP server over stdin/stdout until the client disconnects."""
    server = build_server()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
