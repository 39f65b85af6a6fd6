"""Litestar app factory."""

from __future__ import annotations

from litestar import Litestar, get


@get("/healthz", operation_id="healthz", sync_to_thread=False)
def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


def create_app() -> Litestar:
    """Build the service's ASGI app."""
    return Litestar(route_handlers=[healthz])
