"""MCP server: the tuner's capabilities as tools, resources and prompts for LLM agents.

- `build_server()`: the SDK low-level server (tools, resources, prompts);
- `run_stdio()`: serve it over stdio (`sglang-tuner mcp`);
- `McpEndpoint`: the streamable-HTTP endpoint the service mounts at `/mcp`, with Host/Origin validation and
  bearer-token scopes; `mcp_http_app(...)` wraps it as a standalone ASGI app;
- `openai_tool_schemas()`: the same tools as OpenAI-style function schemas (`GET /v1/tools`).
"""

from service.mcp.catalogue import tool_catalogue
from service.mcp.http import WRITE_SCOPE, McpEndpoint, ScopedTokens, caller_may_write, caller_token, mcp_http_app
from service.mcp.job_tools import ServiceJobs
from service.mcp.openai_tools import openai_tool_schemas
from service.mcp.server import build_server, run_stdio
from service.mcp.tools import MAX_RESULT_CHARS, ToolInputError, ToolResult, ToolSpec

__all__ = [
    "MAX_RESULT_CHARS",
    "WRITE_SCOPE",
    "McpEndpoint",
    "ScopedTokens",
    "ServiceJobs",
    "ToolInputError",
    "ToolResult",
    "ToolSpec",
    "build_server",
    "caller_may_write",
    "caller_token",
    "mcp_http_app",
    "openai_tool_schemas",
    "run_stdio",
    "tool_catalogue",
]
