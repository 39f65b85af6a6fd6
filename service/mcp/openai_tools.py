"""The MCP tools as OpenAI-style function schemas, for agents that do not speak MCP (`GET /v1/tools`)."""

from __future__ import annotations

from typing import Any

from service.mcp.catalogue import tool_catalogue
from service.mcp.job_tools import ServiceJobs


def openai_tool_schemas(jobs: ServiceJobs | None = None) -> list[dict[str, Any]]:
    """Every tool as `{"type": "function", "function": {name, description, parameters}}`.

    The parameters are the same msgspec-derived JSON schemas MCP `tools/list` shows; `x-writes` marks the
    tools that need a write-scoped key.
    """
    return [
        {"type": "function", "function": {"name": spec.name, "description": spec.description,
                                          "parameters": spec.input_schema()}, "x-writes": spec.writes}
        for spec in tool_catalogue(jobs)
    ]
