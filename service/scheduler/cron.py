"""Cron expressions: the standard five fields, or six with seconds first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger

_FIELDS_5 = ("minute", "hour", "day", "month", "day_of_week")
_FIELDS_6 = ("second", *_FIELDS_5)


class CronError(ValueError):
    """A cron expression or timezone APScheduler cannot use."""


def cron_trigger(expression: str, timezone: str = "UTC") -> CronTrigger:
    """A trigger for `minute hour day month day_of_week` (or with a leading `second` field).

    Raises:
        CronError: wrong field count, a bad field, or an unknown timezone.
    """
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise CronError(f"unknown timezone {timezone!r}; use an IANA name such as 'UTC' or 'Europe/Paris'") from exc
    parts = expression.split()
    if len(parts) not in (5, 6):
        raise CronError(f"cron {expression!r} has {len(parts)} fields; expected 5 (minute hour day month weekday) "
                        "or 6 (with seconds first)")
    names = _FIELDS_5 if len(parts) == 5 else _FIELDS_6
    try:
        return CronTrigger(timezone=zone, **dict(zip(names, parts, strict=True)))
    except ValueError as exc:
        raise CronError(f"cron {expression!r}: {exc}") from exc


def fire_times(trigger: CronTrigger, after: datetime, until: datetime, limit: int = 1000) -> list[datetime]:
    """Fire times in (`after`, `until`], oldest first, at most the `limit` most recent."""
    found: list[datetime] = []
    previous: datetime | None = None
    cursor = after + timedelta(microseconds=1)
    while True:
        nxt = trigger.get_next_fire_time(previous, cursor)
        if nxt is None or nxt > until:
            break
        found.append(nxt)
        if len(found) > limit:
            found.pop(0)
        previous, cursor = nxt, nxt + timedelta(microseconds=1)
    return found


def latest_fire_time(trigger: CronTrigger, now: datetime, within_seconds: float) -> datetime | None:
    """The last fire time at or before `now`, if it is no older than `within_seconds`."""
    times = fire_times(trigger, now - timedelta(seconds=within_seconds), now, limit=1)
    return times[-1] if times else None


def next_fire_time(trigger: CronTrigger, now: datetime | None = None) -> datetime | None:
    """The next fire time after `now`."""
    now = now or datetime.now(UTC)
    fire_time: datetime | None = trigger.get_next_fire_time(None, now)  # APScheduler 3 is untyped
    return fire_time
