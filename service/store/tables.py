"""The project's own tables (SQLAlchemy Core), shared by SQLite and PostgreSQL.

Times are stored as UTC epoch seconds (float): the same comparisons on both dialects, no timezone
ambiguity in SQLite's text datetimes. JSON bodies are msgspec-encoded text, decoded into typed Structs.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    text,
)

metadata = MetaData()

jobs = Table(
    "jobs",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("playbook", String(200), nullable=False),
    Column("runner", String(200), nullable=False),
    # The runner resource (a GPU host) the job holds while running; NULL holds nothing exclusive.
    Column("resource", String(300), nullable=True),
    Column("state", String(16), nullable=False),
    Column("request", Text, nullable=False),
    Column("idempotency_key", String(200), nullable=True, unique=True),
    Column("schedule_id", String(40), nullable=True),
    Column("created_by", String(40), nullable=True),
    Column("created_at", Float, nullable=False),
    Column("started_at", Float, nullable=True),
    Column("finished_at", Float, nullable=True),
    Column("stop_reason", Text, nullable=True),
    Column("report", Text, nullable=True),
    Column("cancel_requested", Boolean, nullable=False, server_default=text("false")),
    Column("attempt", Integer, nullable=False, server_default=text("0")),
    Column("lease_owner", String(80), nullable=True),
    Column("lease_expires_at", Float, nullable=True),
    Column("heartbeat_at", Float, nullable=True),
    Index("ix_jobs_state_created", "state", "created_at"),
    Index("ix_jobs_created", "created_at", "id"),
    # Two jobs never hold the same runner resource at once: the database refuses a second running holder.
    Index(
        "uq_jobs_running_resource", "resource", unique=True,
        sqlite_where=text("state = 'running' AND resource IS NOT NULL"),
        postgresql_where=text("state = 'running' AND resource IS NOT NULL"),
    ),
)

rounds = Table(
    "rounds",
    metadata,
    Column("job_id", String(40), ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("idx", Integer, primary_key=True),
    Column("technique", String(200), nullable=False),
    Column("state", String(16), nullable=False),
    Column("body", Text, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("updated_at", Float, nullable=False),
)

events = Table(
    "events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", String(40), ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("kind", String(40), nullable=False),
    Column("body", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("ix_events_job", "job_id", "id"),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("secret_hash", String(128), nullable=False),
    Column("scopes", String(100), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("revoked_at", Float, nullable=True),
)

schedules = Table(
    "schedules",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("cron", String(200), nullable=False),
    Column("timezone", String(64), nullable=False),
    Column("job_request", Text, nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("misfire_grace_seconds", Integer, nullable=False),
    Column("catch_up", String(16), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("last_fire_at", Float, nullable=True),
)

# One row per scheduled fire time: the primary key is the lease that lets exactly one instance fire it.
schedule_fires = Table(
    "schedule_fires",
    metadata,
    Column("schedule_id", String(40), ForeignKey("schedules.id", ondelete="CASCADE"), primary_key=True),
    Column("fire_at", Float, primary_key=True),
    Column("outcome", String(16), nullable=False),
    Column("job_id", String(40), nullable=True),
    Column("instance", String(80), nullable=False),
    Column("recorded_at", Float, nullable=False),
)

# Fitted calibrations of a cost model (service.domain.calibration); the body is the whole fit, the key
# columns are what a simulation looks one up by.
calibrations = Table(
    "calibrations",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("model", String(300), nullable=False),
    Column("gpu", String(100), nullable=False),
    Column("sglang_version", String(40), nullable=False),
    Column("layout", String(300), nullable=False),
    Column("cost_model", String(100), nullable=False),
    Column("body", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("ix_calibrations_key", "model", "gpu", "sglang_version", "created_at"),
)
