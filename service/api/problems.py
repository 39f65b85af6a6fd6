"""RFC 9457 problem details: every 4xx and 5xx leaves the service as `application/problem+json`.

Domain errors map to HTTP here, in one place; handlers raise `Problem` (or let a store error propagate).
"""

from __future__ import annotations

import re
import traceback
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, NotAuthorizedException, PermissionDeniedException, ValidationException
from litestar.openapi.datastructures import ResponseSpec

from service.logs import get_logger
from service.store import BadCursorError, DuplicateScheduleError, IdempotencyConflictError, StoreError

log = get_logger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "https://sglang-tuner.dev/problems/"


class ProblemDetails(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An RFC 9457 problem: what went wrong, which field, and what to do about it."""

    type: str
    title: str
    status: int
    detail: str
    field: str | None = None
    hint: str | None = None
    instance: str | None = None


class Problem(Exception):
    """Raised by handlers; becomes a problem+json response."""

    def __init__(self, status: int, slug: str, title: str, detail: str, *, field: str | None = None,
                 hint: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.slug, self.title, self.detail = status, slug, title, detail
        self.field, self.hint, self.headers = field, hint, headers or {}

    def body(self, instance: str | None = None) -> ProblemDetails:
        return ProblemDetails(type=TYPE_BASE + self.slug, title=self.title, status=self.status, detail=self.detail,
                              field=self.field, hint=self.hint, instance=instance)


def not_found(what: str, ident: str, hint: str) -> Problem:
    """A 404 naming the missing resource."""
    return Problem(404, "not-found", f"{what} not found", f"no {what} with id {ident!r}", field="id", hint=hint)


def invalid(field: str, detail: str, hint: str) -> Problem:
    """A 422 naming the field at fault."""
    return Problem(422, "invalid-field", "Invalid request field", detail, field=field, hint=hint)


_MSGSPEC_PATH = re.compile(r"^(?P<message>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)


def from_decode_error(exc: msgspec.ValidationError | msgspec.DecodeError, prefix: str = "") -> Problem:
    """A 422 from a msgspec error, with its `$.a.b` path turned into the field name `a.b`."""
    match = _MSGSPEC_PATH.match(str(exc))
    message = match.group("message") if match else str(exc)
    path = (match.group("path") or "").lstrip(".") if match else ""
    field = ".".join(part for part in (prefix, path) if part) or None
    return invalid(field or "body", message, "see the request schema at /schema for the expected shape")


def _from_http(exc: HTTPException) -> Problem:
    if isinstance(exc, NotAuthorizedException):
        return Problem(401, "unauthenticated", "Authentication required", exc.detail, field="Authorization",
                       hint="send 'Authorization: Bearer <key>'; create one with `sglang-tuner keys create`",
                       headers={"WWW-Authenticate": 'Bearer realm="sglang-tuner"'})
    if isinstance(exc, PermissionDeniedException):
        return Problem(403, "forbidden", "Insufficient scope", exc.detail, field="Authorization",
                       hint="use a key with the scope named above (`sglang-tuner keys create --scope ...`)")
    if isinstance(exc, ValidationException):
        return _from_validation(exc)
    status = exc.status_code
    if status == 400:
        return Problem(400, "invalid-request", "Invalid request", exc.detail, field="body",
                       hint="send a JSON body matching the request schema at /schema")
    hints = {404: "see /schema for the routes this service has",
             405: "see /schema for the methods each route accepts",
             413: "send a smaller body; the limit protects the service's memory"}
    return Problem(status, f"http-{status}", _TITLES.get(status, "Request failed"), exc.detail,
                   hint=hints.get(status, "see /schema"))


_TITLES = {400: "Bad request", 404: "Not found", 405: "Method not allowed", 409: "Conflict",
           413: "Request body too large", 415: "Unsupported media type", 429: "Too many requests"}


def _from_validation(exc: ValidationException) -> Problem:
    extra: Any = exc.extra
    field, message = None, exc.detail
    if isinstance(extra, list) and extra and isinstance(extra[0], dict):
        first = extra[0]
        field = first.get("key") or None
        message = f"{exc.detail}: {first.get('message', '')}".rstrip(": ")
        if field in (None, "data"):  # `data` is the handler's name for the body, not a field the user sent
            field = _body_field(str(first.get("message", "")))
    return Problem(400, "invalid-request", "Invalid request", message, field=field or "body",
                   hint="see the request schema at /schema for the expected shape")


def _body_field(message: str) -> str:
    """The field a msgspec message names: `at `$.job`` plus `missing required field `playbook`` is job.playbook."""
    path = re.search(r"at `\$\.?([^`]*)`", message)
    missing = re.search(r"missing required field `([^`]+)`", message)
    parts = [path.group(1) if path else "", missing.group(1) if missing else ""]
    return ".".join(part for part in parts if part) or "body"


def _from_store(exc: StoreError | BadCursorError) -> Problem:
    if isinstance(exc, IdempotencyConflictError):
        return Problem(422, "idempotency-key-reused", "Idempotency-Key reused", str(exc), field="Idempotency-Key",
                       hint="use a new key for a different request; replay a key only with the same body")
    if isinstance(exc, DuplicateScheduleError):
        return Problem(409, "duplicate-schedule", "Schedule exists", str(exc), field="name",
                       hint="choose another name, or delete the existing schedule first")
    if isinstance(exc, BadCursorError):
        return invalid("cursor", str(exc), "pass the next_cursor of the previous page unchanged")
    return Problem(409, "conflict", "Conflict", str(exc), hint="read the resource again and retry")


def problem_response(request: Request[Any, Any, Any], exc: Exception) -> Response[ProblemDetails]:
    """The single exception handler: every error becomes problem+json."""
    if isinstance(exc, Problem):
        problem = exc
    elif isinstance(exc, HTTPException):
        problem = _from_http(exc)
    elif isinstance(exc, StoreError | BadCursorError):
        problem = _from_store(exc)
    else:
        # The traceback as a field: the JSON log renderer drops exc_info, and the 500 points the user here.
        log.error("unhandled_error", method=request.method, path=request.url.path, error=repr(exc),
                  traceback="".join(traceback.format_exception(exc)))
        problem = Problem(500, "internal", "Internal error", "the service failed to handle this request",
                          hint="retry; if it persists, the service log has the traceback")
    return Response(problem.body(instance=request.url.path), status_code=problem.status,
                    media_type=PROBLEM_MEDIA_TYPE, headers=problem.headers)


def problem_responses(*statuses: int) -> dict[int, ResponseSpec]:
    """OpenAPI entries documenting problem+json for the given statuses."""
    return {status: ResponseSpec(data_container=ProblemDetails, media_type=PROBLEM_MEDIA_TYPE,
                                 description=_TITLES.get(status, "Problem"), generate_examples=False)
            for status in statuses}
