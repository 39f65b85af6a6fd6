"""The MCP server over streamable HTTP, as an ASGI app the HTTP service mounts at `/mcp`.

Agents on other machines reach it through the service, so it checks what a browser-borne attack would
abuse: the Host and Origin headers (DNS-rebinding protection, by the SDK's transport security) and a bearer
token, whose scopes decide whether tools that start or cancel work may run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette

from service.mcp.job_tools import ServiceJobs
from service.mcp.server import build_server

TokenCheck = Callable[[str], Awaitable[Sequence[str] | None]]
WRITE_SCOPE = "write"


class ScopedTokens:
    """Adapts the service's key check (token -> scopes, or None) to the SDK's token verifier."""

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


def mcp_http_app(
    *,
    check_token: TokenCheck,
    allowed_hosts: Sequence[str],
    allowed_origins: Sequence[str],
    resource_url: str,
    jobs: ServiceJobs | None = None,
    path: str = "/mcp",
) -> Starlette:
    """Build the streamable-HTTP MCP app.

    Args:
        check_token: Returns a bearer token's scopes (`read`, `write`, ...) or None when the token is unknown.
            Every request needs a valid token; tools that start or cancel work need `write`.
        allowed_hosts: Host header values accepted (`api.example.com`, `127.0.0.1:*`).
        allowed_origins: Origin header values accepted (`https://console.example.com`); a browser request
            from any other origin is refused.
        resource_url: This server's public URL, advertised to clients in the auth metadata.
        jobs: Where job tools send their requests (default: SGLANG_TUNER_URL).
        path: The route inside the app (mount the app at `/` of a sub-path, or keep `/mcp`).

    Returns:
        A Starlette ASGI app; its lifespan runs the MCP session manager, so the host must run it.
    """
    server = build_server(jobs, write_allowed=caller_may_write)
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=list(allowed_hosts),
                                         allowed_origins=list(allowed_origins))
    # The token check is the service's own API-key lookup, not an OAuth audience check.
    auth = AuthSettings(issuer_url=resource_url, resource_server_url=resource_url, required_scopes=[],
                        validate_token_resource=False)
    return server.streamable_http_app(streamable_http_path=path, transport_security=security, auth=auth,
                                      token_verifier=ScopedTokens(check_token), stateless_http=True,
                                      json_response=True)
