"""The MCP server over streamable HTTP: an ASGI endpoint the HTTP service mounts at `/mcp`.

Agents on other machines reach it through the service, so it checks what a browser-borne attack would
abuse, in this order: the Host and Origin headers (DNS-rebinding protection, by the SDK's transport
security), then a bearer token, whose scopes decide whether tools that start or cancel work may run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from mcp.server.auth.middleware.auth_context import auth_context_var, get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from service.mcp.job_tools import ServiceJobs
from service.mcp.server import build_server

TokenCheck = Callable[[str], Awaitable[Sequence[str] | None]]
# Scopes granted to a request without a token (None: refuse it); the service grants `read` in --dev on loopback.
AnonymousScopes = Callable[[Scope], Sequence[str] | None]
WRITE_SCOPE = "write"
DEFAULT_MAX_BODY_BYTES = 4 << 20


class ScopedTokens:
    """Adapts the service's key check (token -> scopes, or None) to the SDK's access tokens."""

    def __init__(self, check: TokenCheck) -> None:
        self._check = check

    async def verify_token(self, token: str) -> AccessToken | None:
        """Return the token's scopes, or None to refuse it with 401."""
        scopes = await self._check(token)
        if scopes is None:
            return None
        return AccessToken(token=token, client_id="sglang-tuner-key", scopes=list(scopes))


def caller_may_write() -> bool:
    """Whether the current request's bearer token carries the write scope."""
    token = get_access_token()
    return token is not None and WRITE_SCOPE in token.scopes


def caller_token() -> str | None:
    """The bearer token of the current request (None without one), to forward to the service's API."""
    token = get_access_token()
    return token.token if token is not None and token.token else None


class McpEndpoint:
    """The streamable-HTTP endpoint: Host/Origin check, bearer token, then the SDK's session manager.

    It answers every path it is given, so it can be mounted under any prefix. `lifespan()` runs the
    session manager and must be entered once, by the host application's lifespan, before requests arrive.
    """

    def __init__(self, *, check_token: TokenCheck, allowed_hosts: Sequence[str], allowed_origins: Sequence[str],
                 jobs: ServiceJobs | None = None, anonymous: AnonymousScopes | None = None,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, realm: str = "sglang-tuner") -> None:
        self._tokens = ScopedTokens(check_token)
        self._realm = realm
        self._anonymous = anonymous
        security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=list(allowed_hosts),
                                             allowed_origins=list(allowed_origins))
        self._security = TransportSecurityMiddleware(security)
        # Stateless with JSON responses: any instance behind a load balancer can answer any request.
        self.session_manager = StreamableHTTPSessionManager(
            app=build_server(jobs, write_allowed=caller_may_write), stateless=True, json_response=True,
            security_settings=security, max_request_body_size=max_body_bytes)

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        """Run the session manager (its task group) for as long as the host application runs."""
        return self.session_manager.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        refusal = await self._security.validate_request(request, is_post=request.method == "POST")
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        access = await self._authenticate(scope, request)
        if access is None:
            await _unauthorized(self._realm, scope, receive, send)
            return
        reset = auth_context_var.set(AuthenticatedUser(access))
        try:
            await self.session_manager.handle_request(scope, receive, send)
        finally:
            auth_context_var.reset(reset)

    async def _authenticate(self, scope: Scope, request: Request) -> AccessToken | None:
        header = request.headers.get("authorization", "")
        if header[:7].lower() == "bearer ":
            token = header[7:].strip()
            return await self._tokens.verify_token(token) if token else None
        granted = self._anonymous(scope) if self._anonymous is not None else None
        if granted is None:
            return None
        return AccessToken(token="", client_id="anonymous", scopes=list(granted))


async def _unauthorized(realm: str, scope: Scope, receive: Receive, send: Send) -> None:
    body = {"error": "invalid_token",
            "error_description": "send 'Authorization: Bearer <key>' with an API key of the service "
                                 "(`sglang-tuner keys create`); tools that start or cancel work need the write scope"}
    response = JSONResponse(body, status_code=401,
                            headers={"WWW-Authenticate": f'Bearer realm="{realm}", error="invalid_token"'})
    await response(scope, receive, send)


def mcp_http_app(
    *,
    check_token: TokenCheck,
    allowed_hosts: Sequence[str],
    allowed_origins: Sequence[str],
    resource_url: str,
    jobs: ServiceJobs | None = None,
    path: str = "/mcp",
    anonymous: AnonymousScopes | None = None,
) -> Starlette:
    """Build the streamable-HTTP MCP server as a standalone ASGI app.

    Args:
        check_token: Returns a bearer token's scopes (`read`, `write`, ...) or None when the token is unknown.
            Every request needs a valid token (unless `anonymous` grants scopes); tools that start or cancel
            work need `write`.
        allowed_hosts: Host header values accepted (`api.example.com`, `127.0.0.1:*`).
        allowed_origins: Origin header values accepted (`https://console.example.com`); a browser request
            from any other origin is refused.
        resource_url: This server's public URL, named as the realm of the 401 challenge.
        jobs: Where job tools send their requests (default: SGLANG_TUNER_URL).
        path: The route inside the app.
        anonymous: Scopes for a request without a token, or None to refuse it.

    Returns:
        A Starlette ASGI app; its lifespan runs the MCP session manager, so the host must run it.
    """
    endpoint = McpEndpoint(check_token=check_token, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins,
                           jobs=jobs, anonymous=anonymous, realm=resource_url)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with endpoint.lifespan():
            yield

    return Starlette(routes=[Route(path, endpoint=endpoint, methods=["GET", "POST", "DELETE"])], lifespan=lifespan)
