"""API-key authentication and scope guards.

Keys arrive as `Authorization: Bearer sgt_key_...` (or `X-API-Key`). Scopes: `read`, `write`, and `admin`
(keys and schedules); a wider scope includes the narrower ones. In `--dev` mode on loopback, requests
without a key are allowed from loopback clients only, and the service says so loudly at start.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler

from service.api.runtime import ServiceRuntime, is_loopback
from service.store import ApiKeyRecord, Scope

SCOPE_OPT = "scope"
SECURITY = [{"apiKey": []}]


def presented_token(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    """The key a request presents, if any."""
    header = connection.headers.get("authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip() or None
    return connection.headers.get("x-api-key") or None


class KeyCache:
    """Recently verified keys, so a busy client costs one lookup per few seconds, not per request.

    A revoked key stops working within `ttl` seconds.
    """

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._entries: dict[str, tuple[float, ApiKeyRecord | None]] = {}

    async def lookup(self, runtime: ServiceRuntime, token: str) -> ApiKeyRecord | None:
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        hit = self._entries.get(digest)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        found = await runtime.store.authenticate(token)
        if len(self._entries) > 10_000:
            self._entries.clear()
        self._entries[digest] = (now, found)
        return found


async def scope_guard(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """Admit the request when its key grants the route's scope (`opt={"scope": ...}`)."""
    needed = handler.opt.get(SCOPE_OPT)
    if needed is None:
        return
    scope = Scope(needed)
    runtime: ServiceRuntime = connection.app.state.runtime
    token = presented_token(connection)
    if token is None:
        if _anonymous_allowed(runtime, connection, scope):
            return
        raise NotAuthorizedException(f"this route needs an API key with the {scope.value!r} scope")
    key = await connection.app.state.key_cache.lookup(runtime, token)
    if key is None:
        raise NotAuthorizedException("the API key is unknown, malformed or revoked")
    if not key.allows(scope):
        held = ", ".join(s.value for s in key.scopes)
        raise PermissionDeniedException(f"this route needs the {scope.value!r} scope; the key has: {held}")
    connection.state.api_key = key


def _anonymous_allowed(runtime: ServiceRuntime, connection: ASGIConnection[Any, Any, Any, Any],
                       scope: Scope) -> bool:
    if scope == Scope.READ and runtime.settings.open_reads:
        return True
    client = connection.client.host if connection.client else ""
    return runtime.settings.dev and is_loopback(client)


def key_id_of(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    """The id of the key that authenticated this request (None in dev mode without a key)."""
    key = connection.state.get("api_key") if hasattr(connection.state, "get") else None
    return key.id if isinstance(key, ApiKeyRecord) else None
