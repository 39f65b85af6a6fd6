"""Row <-> record conversion and the cursor format, shared by the query mixins."""

from __future__ import annotations

import base64
import secrets
from typing import Any, TypeAlias

import msgspec
from sqlalchemy import Row

from service.domain import JobState
from service.store.records import EventRecord, JobRecord

# A row of any columns: SQLAlchemy types a row by the columns selected (a variadic generic).
AnyRow: TypeAlias = Row[*tuple[Any, ...]]


def _plain_number(value: Any) -> Any:
    # Policies and runners compute with numpy; its scalars and arrays are stored as plain JSON numbers.
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    raise NotImplementedError(f"cannot store a {type(value).__name__}")


_encoder = msgspec.json.Encoder(enc_hook=_plain_number)


def dumps(value: Any) -> str:
    """JSON text of any msgspec-encodable value."""
    return _encoder.encode(value).decode()


def loads(raw: str | None) -> Any:
    """The value of JSON text (None stays None)."""
    return None if raw is None else msgspec.json.decode(raw)


def new_id(prefix: str) -> str:
    """A short random id with a readable prefix (`job_...`, `key_...`)."""
    return f"{prefix}_{secrets.token_hex(8)}"


def job_from_row(row: AnyRow) -> JobRecord:
    m = row._mapping
    return JobRecord(
        id=m["id"], kind=m["kind"], playbook=m["playbook"], runner=m["runner"], resource=m["resource"],
        state=JobState(m["state"]), request=loads(m["request"]), idempotency_key=m["idempotency_key"],
        schedule_id=m["schedule_id"], created_by=m["created_by"], created_at=m["created_at"],
        started_at=m["started_at"], finished_at=m["finished_at"], stop_reason=m["stop_reason"],
        report=loads(m["report"]) if "report" in m else None, cancel_requested=bool(m["cancel_requested"]),
        attempt=m["attempt"],
        lease_owner=m["lease_owner"], lease_expires_at=m["lease_expires_at"],
    )


def event_from_row(row: AnyRow) -> EventRecord:
    m = row._mapping
    return EventRecord(id=m["id"], job_id=m["job_id"], kind=m["kind"], body=loads(m["body"]),
                       created_at=m["created_at"])


class BadCursorError(ValueError):
    """A pagination cursor that this service did not issue."""


def encode_cursor(created_at: float, job_id: str) -> str:
    return base64.urlsafe_b64encode(dumps([created_at, job_id]).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created_at, job_id = msgspec.json.decode(base64.urlsafe_b64decode(padded.encode()))
        return float(created_at), str(job_id)
    except Exception as exc:  # noqa: BLE001 - any malformed cursor is the client's error
        raise BadCursorError("cursor is not one this service issued; start again without it") from exc
