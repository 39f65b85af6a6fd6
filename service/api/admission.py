"""Which requests reach a handler: no cross-site writes, no input beyond the service's limits.

Cross-site writes: a web page the user visits may send a POST to `127.0.0.1:8000` without a preflight when
its body is `text/plain`, form-encoded or multipart; in `--dev` no key stops it. So every state-changing
request must carry the content type its route reads (`application/json`, or `multipart/form-data` for
uploads; 415 otherwise), and a browser's `Origin`, when sent, must be the service's own (403). In `--dev`
the `Host` header must also name the service (421), so a page whose domain was rebound to 127.0.0.1
cannot read it either. The allowed hosts and origins are the MCP mount's (`service.api.mcp_mount`).

Limits: paths and query strings hold no NUL and only UTF-8; JSON bodies are read (up to the route's size
limit) and checked by `service.api.json_limits` before the handler decodes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from litestar.enums import ScopeType
from litestar.exceptions import HTTPException
from litestar.handlers import HTTPRouteHandler
from litestar.types import ASGIApp, HTTPRequestEvent, HTTPScope, Receive, ReceiveMessage, Scope, Send

from service.api.json_limits import InputRefused, check_json_body, check_path, check_query_string
from service.api.mcp_mount import IN_PROCESS, allowed_hosts, allowed_origins
from service.api.problems import Problem
from service.api.runtime import ServiceSettings

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
BODY_OPT = "body"  # a route's `opt`: the body it reads, "json" (the default) or "multipart"
_MEDIA = {"json": "application/json", "multipart": "multipart/form-data"}


def admission(settings: ServiceSettings) -> Callable[[ASGIApp], ASGIApp]:
    """An ASGI middleware factory applying the checks above; runs after routing (app-level middleware)."""
    hosts, origins = allowed_hosts(settings), allowed_origins(settings)

    def factory(app: ASGIApp) -> ASGIApp:
        async def admit(scope: Scope, receive: Receive, send: Send) -> None:
            handler = scope.get("route_handler")
            if scope["type"] != ScopeType.HTTP or not isinstance(handler, HTTPRouteHandler):
                await app(scope, receive, send)  # the MCP mount (an ASGI handler) checks its own requests
                return
            await admit_http(scope, handler, receive, send)

        async def admit_http(scope: HTTPScope, handler: HTTPRouteHandler, receive: Receive, send: Send) -> None:
            try:
                check_path(scope["path"])
                check_query_string(scope.get("query_string", b""))
            except InputRefused as exc:
                raise _bad_request(exc) from exc
            headers = _headers(scope)
            writes = scope["method"] in STATE_CHANGING
            if not scope.get(IN_PROCESS):  # MCP tools calling this app: the mount checked Host and Origin
                if settings.dev:
                    _check_host(headers.get("host", ""), hosts)
                if writes:
                    _check_origin(headers.get("origin"), origins)
            if writes:
                receive = await _checked_body(scope, handler, receive, headers)
            await app(scope, receive, send)
        return admit
    return factory


def _headers(scope: Scope) -> dict[str, str]:
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}


def _bad_request(exc: InputRefused) -> Problem:
    return Problem(400, "input-limit", "Input beyond the service's limits", exc.detail, field=exc.field,
                   hint=exc.hint)


def _matches(value: str, allowed: list[str]) -> bool:
    # As the MCP transport matches them: exact, or `name:*` for any port.
    return value in allowed or any(
        pattern.endswith(":*") and value.startswith(pattern[:-1]) and value[len(pattern) - 1:].isdigit()
        for pattern in allowed)


def _check_host(host: str, allowed: list[str]) -> None:
    if not _matches(host, allowed):
        raise Problem(421, "host-refused", "Host not served", f"this service does not answer for host {host!r}",
                      field="Host", hint="use the address the service listens on (or --public-url's host)")


def _check_origin(origin: str | None, allowed: list[str]) -> None:
    if origin is not None and not _matches(origin, allowed):
        raise Problem(403, "cross-site-refused", "Cross-site request refused",
                      f"writes from pages served by {origin!r} are refused", field="Origin",
                      hint="call the API from a program, a page served by this service, or an origin given to "
                           "the service as allowed")


def _expected_media(scope: Scope) -> str:
    handler = scope.get("route_handler")
    opt: dict[str, Any] = getattr(handler, "opt", None) or {}
    return _MEDIA[opt.get(BODY_OPT, "json")]


def _check_content_type(content_type: str | None, expected: str, has_body: bool) -> None:
    if content_type is None:
        if has_body:
            raise _unsupported("none", expected)
        return
    media, *params = (part.strip().lower() for part in content_type.split(";"))
    charset = next((p.partition("=")[2].strip('"') for p in params if p.startswith("charset=")), "utf-8")
    if media != expected or (expected == _MEDIA["json"] and charset != "utf-8"):
        raise _unsupported(content_type, expected)


def _unsupported(sent: str, expected: str) -> Problem:
    return Problem(415, "unsupported-media-type", "Unsupported media type",
                   f"this route reads {expected} bodies, not {sent}", field="Content-Type",
                   hint=f"send 'Content-Type: {expected}'" + (" with a UTF-8 JSON body" if "json" in expected else ""))


async def _checked_body(scope: HTTPScope, handler: HTTPRouteHandler, receive: Receive,
                        headers: dict[str, str]) -> Receive:
    """Check the content type; read and check a JSON body, then hand the handler a receive that replays it."""
    expected = _expected_media(scope)
    declared = headers.get("content-length")
    has_body = "transfer-encoding" in headers or (declared not in (None, "0"))
    _check_content_type(headers.get("content-type"), expected, has_body)
    if expected != _MEDIA["json"] or not has_body:
        return receive
    body = await _read_body(handler, receive)
    try:
        check_json_body(body)
    except InputRefused as exc:
        raise _bad_request(exc) from exc
    replayed = False

    async def replay() -> ReceiveMessage:
        nonlocal replayed
        if replayed:
            return await receive()  # after the body: the disconnect, when the client goes
        replayed = True
        return HTTPRequestEvent(type="http.request", body=body, more_body=False)
    return replay


async def _read_body(handler: HTTPRouteHandler, receive: Receive) -> bytes:
    limit = handler.resolve_request_max_body_size()
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client went away; the handler sees the short body
        chunk = message.get("body", b"")
        size += len(chunk)
        if limit is not None and size > limit:
            raise HTTPException(status_code=413, detail=f"the body is larger than the limit of {limit:,} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)
