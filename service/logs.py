"""structlog configured once: JSON lines when stderr is not a terminal, console rendering otherwise.

Secrets never reach a log line: keys named like credentials are masked by `redact_secrets`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

SECRET_MARKERS = ("key", "token", "secret", "password", "authorization", "credential")
_configured = False


def redact_secrets(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Mask values whose key names a credential (api_key, token, password, Authorization...)."""
    for key in list(event):
        lowered = key.lower()
        if key != "event" and any(marker in lowered for marker in SECRET_MARKERS) and "tokens" not in lowered:
            event[key] = "***"
    return event


def configure_logging(level: str = "info", *, json: bool | None = None) -> None:
    """Configure structlog and stdlib logging once per process (later calls only change the level)."""
    global _configured
    numeric = getattr(logging, level.upper(), logging.INFO)
    if _configured:
        logging.getLogger().setLevel(numeric)
        return
    use_json = (not sys.stderr.isatty()) if json is None else json
    renderer: Any = structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact_secrets,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=numeric, stream=sys.stderr, format="%(message)s")
    _configured = True


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
