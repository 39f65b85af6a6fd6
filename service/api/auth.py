"""API-key authentication and scope guards.

Keys arrive as `Authorization: Bearer sgt_key_...` (or `X-API-Key`). Scopes: `read`, `write`, and `admin`
(keys and schedules); a wider scope includes the narrower ones. In `--dev` mode on loopback, requests
without a key are allowed from loopback clients only, and the service says so loudly at start.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler
from litestar.openapi.spec import SecurityRequirement

from service.api.runtime import ServiceRuntime, is_loopback
from service.store import ApiKeyRecord, Scope

SCOPE_OPT = "scope"
SECURITY: list[SecurityRequirement] = [{"apiKey": []}]


def presented_token(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    """The key a request presents, if any."""
    header = connection.headers.get("authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip() or None
    return connection.headers.get("x-api-key") or None


class KeyCache:
    """Recently verified keys, so a busy client costs one lookup per few seconds, not per request.

    A revoked key stops working within `ttl` seconds (0: every request reads the database). The database is
    kept off the request path: a key in use is verified again in the background once its entry is half
    `ttl` old, and an entry that did expire is read once, shared by every request presenting that key
    meanwhile. Without this, the fifty requests in flight when an entry expired each read the key at once,
    and every request waited about 100 ms behind those reads (BENCHMARKS.md, "HTTP service").
    """

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._entries: dict[str, tuple[float, ApiKeyRecord | None]] = {}
        self._reads: dict[str, asyncio.Task[ApiKeyRecord | None]] = {}

    async def lookup(self, runtime: ServiceRuntime, token: str) -> ApiKeyRecord | None:
        """The live key `token` belongs to (None: unknown, malformed or revoked), as verified at most `ttl` ago."""
        if self.ttl <= 0:
            return await runtime.store.authenticate(token)
        digest = hashlib.sha256(token.encode()).hexdigest()
        hit = self._entries.get(digest)
        if hit is not None:
            age = time.monotonic() - hit[0]
            if age < self.ttl:
                if age >= self.ttl / 2:
                    self._verify(runtime, digest, token)  # ahead of expiry; this request does not wait
                return hit[1]
        # Shielded: one client giving up must not cancel the read the others wait for.
        return await asyncio.shield(self._verify(runtime, digest, token))

    def _verify(self, runtime: ServiceRuntime, digest: str, token: str) -> asyncio.Task[ApiKeyRecord | None]:
        """The read of this key in flight, or a new one."""
        pending = self._reads.get(digest)
        if pending is None:
            pending = asyncio.create_task(self._read(runtime, digest, token), name="api-key-verify")
            pending.add_done_callback(_retrieve_error)
            self._reads[digest] = pending
        return pending

    async def _read(self, runtime: ServiceRuntime, digest: str, token: str) -> ApiKeyRecord | None:
        # The entry is as old as the moment the read began: a revocation committed later is seen within ttl.
        started = time.monotonic()
        try:
            found = await runtime.store.authenticate(token)
        finally:
            self._reads.pop(digest, None)
        if len(self._entries) > 10_000:
            self._entries.clear()
        self._entries[digest] = (started, found)
        return found


def _retrieve_error(task: asyncio.Task[ApiKeyRecord | None]) -> None:
    # A failed background verification is retried by the next request; waiting requests get the error.
    if not task.cancelled():
        task.exception()


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
