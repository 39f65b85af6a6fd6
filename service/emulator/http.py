"""Minimal ASGI plumbing: read a JSON body, send JSON, text or a server-sent-event stream.

A framework would cost startup time for nothing: the emulator serves a dozen fixed routes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import msgspec

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_JSON = msgspec.json.Encoder()


class BadRequest(Exception):
    """A request the server refuses with 400 and SGLang's error shape."""


async def read_json(receive: Receive) -> Any:
    """The request body decoded as JSON; raises `BadRequest` when it is not."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    try:
        return msgspec.json.decode(body) if body else {}
    except msgspec.DecodeError as exc:
        raise BadRequest(f"invalid JSON body: {exc}") from None


async def send_bytes(send: Send, status: int, body: bytes, content_type: str) -> None:
    """A complete response."""
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def send_json(send: Send, payload: Any, status: int = 200) -> None:
    """A JSON response."""
    await send_bytes(send, status, _JSON.encode(payload), "application/json")


async def send_text(send: Send, text: str, status: int = 200) -> None:
    """A plain-text response."""
    await send_bytes(send, status, text.encode(), "text/plain; charset=utf-8")


async def send_error(send: Send, message: str, status: int = 400) -> None:
    """SGLang's non-stream error shape (`_create_error_response`)."""
    await send_json(send, {"error": {"message": message}}, status)


async def send_events(send: Send, events: AsyncIterator[Any]) -> None:
    """`text/event-stream`: one `data: <json>` event per item, then `data: [DONE]`."""
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
    async for item in events:
        await send({"type": "http.response.body", "body": b"data: " + _JSON.encode(item) + b"\n\n",
                    "more_body": True})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})


def query_params(scope: Scope) -> dict[str, str]:
    """The query string as a flat mapping."""
    raw = scope.get("query_string", b"").decode()
    pairs = (part.split("=", 1) for part in raw.split("&") if part)
    return {key: (value[0] if value else "") for key, *value in pairs}
