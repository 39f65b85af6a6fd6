"""Server-side request durations for `/metrics`: what the service itself adds, apart from any client's view."""

from __future__ import annotations

import time
from collections.abc import Callable

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

from service.workers.metrics import ServiceMetrics


def request_timing(metrics: ServiceMetrics) -> Callable[[ASGIApp], ASGIApp]:
    """An ASGI middleware factory that observes each HTTP request in `metrics.request_seconds`.

    Runs after routing (Litestar app-level middleware), so requests are labelled by their route's
    `operation_id`; the time spent parsing the request before the app is called is not included.
    """
    def factory(app: ASGIApp) -> ASGIApp:
        async def timed(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != ScopeType.HTTP:
                await app(scope, receive, send)
                return
            started = time.perf_counter()
            try:
                await app(scope, receive, send)
            finally:
                handler = scope.get("route_handler")
                operation = getattr(handler, "operation_id", None)
                metrics.request_seconds.labels(operation=operation if isinstance(operation, str) else "other") \
                    .observe(time.perf_counter() - started)
        return timed
    return factory
