"""The MCP server mounted at `/mcp`: the service's API keys as bearer tokens, Host and Origin checked.

Job tools reach the service's own `/v1/jobs` in-process (an httpx ASGI transport onto this very app), with
the caller's token: the same requests, scope checks and problem details as over the network, without a
socket or a second code path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

import httpx
from litestar import Litestar, asgi
from litestar.types import Receive, Scope, Send

from service.api.problems import Problem
from service.api.runtime import ServiceRuntime, ServiceSettings, is_loopback
from service.mcp import McpEndpoint, ServiceJobs, caller_token
from service.store import Scope as KeyScope

MOUNT_PATH = "/mcp"
STATE_KEY = "mcp_endpoint"
# Set in the scope of the requests the MCP tools make to this app in-process: the mount has already
# checked their Host and Origin (`service.api.admission` does not again).
IN_PROCESS = "sglang_tuner.in_process"
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
_WILDCARD_BINDS = ("", "0.0.0.0", "::")


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def allowed_hosts(settings: ServiceSettings) -> list[str]:
    """Host header values /mcp accepts: loopback, the bind address, and the public URL's host."""
    names = list(_LOOPBACK)
    if settings.host not in _WILDCARD_BINDS:
        names.append(_bracketed(settings.host))
    hosts = [value for name in dict.fromkeys(names) for value in (name, f"{name}:*")]
    if settings.public_url:
        parts = urlsplit(settings.public_url)
        hosts += [parts.netloc, f"{_bracketed(parts.hostname or '')}:*"]
    return hosts


def allowed_origins(settings: ServiceSettings) -> list[str]:
    """Origin values /mcp accepts: pages served from loopback, the public URL, and any configured origins."""
    origins = [value for name in _LOOPBACK for value in (f"http://{name}", f"http://{name}:*")]
    if settings.public_url:
        parts = urlsplit(settings.public_url)
        origins.append(f"{parts.scheme}://{parts.netloc}")
    return origins + list(settings.allowed_origins)


def build_mcp_endpoint(app: Litestar, runtime: ServiceRuntime) -> McpEndpoint:
    """The MCP endpoint of this app: keys checked by the service's key cache, job tools served in-process."""
    settings = runtime.settings

    async def check_token(token: str) -> list[str] | None:
        key = await app.state.key_cache.lookup(runtime, token)
        return None if key is None else [scope.value for scope in KeyScope if key.allows(scope)]

    def anonymous(scope: Scope | Any) -> list[str] | None:
        # As the REST API: reads without a key only when open, or in --dev from loopback. Never writes.
        client = scope.get("client")
        if settings.open_reads or (settings.dev and is_loopback(client[0] if client else "")):
            return [KeyScope.READ.value]
        return None

    jobs = ServiceJobs(base_url="http://sglang-tuner.internal", transport=httpx.ASGITransport(app=_in_process(app)),
                       public_url=settings.public_url or "", caller_token=caller_token, timeout=30.0)
    return McpEndpoint(check_token=check_token, allowed_hosts=allowed_hosts(settings),
                       allowed_origins=allowed_origins(settings), jobs=jobs, anonymous=anonymous,
                       max_body_bytes=settings.max_body_bytes, realm=(settings.public_url or "sglang-tuner"))


# An ASGI app as httpx types one: plain mappings where Litestar has TypedDicts.
_Mapping = MutableMapping[str, Any]
_HttpxApp = Callable[[_Mapping, Callable[[], Awaitable[_Mapping]], Callable[[_Mapping], Awaitable[None]]], Awaitable[None]]


def _in_process(app: Litestar) -> _HttpxApp:
    """`app` with the scope of every request marked as coming from the MCP tools in-process."""
    async def marked(scope: _Mapping, receive: Callable[[], Awaitable[_Mapping]],
                     send: Callable[[_Mapping], Awaitable[None]]) -> None:
        await app({**scope, IN_PROCESS: True}, receive, send)  # type: ignore[arg-type]  # httpx types ASGI scopes and messages as plain mappings, Litestar as TypedDicts: the same dicts, no common type
    return marked


@asgi(MOUNT_PATH, is_mount=True, copy_scope=True, include_in_schema=False)
async def mcp_mount(scope: Scope, receive: Receive, send: Send) -> None:
    """The Model Context Protocol over streamable HTTP (POST JSON-RPC; see docs/agents.md)."""
    endpoint: McpEndpoint | None = scope["app"].state.get(STATE_KEY)
    if endpoint is None:
        raise Problem(503, "starting", "Service starting", "the MCP endpoint starts with the service",
                      hint="retry in a moment; GET /readyz says when the service is ready")
    await endpoint(scope, receive, send)  # type: ignore[arg-type]  # Litestar types ASGI scopes and messages as TypedDicts, Starlette (under the MCP SDK) as plain mappings
