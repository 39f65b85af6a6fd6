"""Jobs, rounds, events, API keys, schedules and schedule fires.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_RUNNING_WITH_RESOURCE = sa.text("state = 'running' AND resource IS NOT NULL")


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("playbook", sa.String(200), nullable=False),
        sa.Column("runner", sa.String(200), nullable=False),
        sa.Column("resource", sa.String(300), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("request", sa.Text, nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=True, unique=True),
        sa.Column("schedule_id", sa.String(40), nullable=True),
        sa.Column("created_by", sa.String(40), nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float, nullable=True),
        sa.Column("finished_at", sa.Float, nullable=True),
        sa.Column("stop_reason", sa.Text, nullable=True),
        sa.Column("report", sa.Text, nullable=True),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.text("false")),
        sa.Column("attempt", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("lease_owner", sa.String(80), nullable=True),
        sa.Column("lease_expires_at", sa.Float, nullable=True),
        sa.Column("heartbeat_at", sa.Float, nullable=True),
    )
    op.create_index("ix_jobs_state_created", "jobs", ["state", "created_at"])
    op.create_index("ix_jobs_created", "jobs", ["created_at", "id"])
    op.create_index("uq_jobs_running_resource", "jobs", ["resource"], unique=True,
                    sqlite_where=_RUNNING_WITH_RESOURCE, postgresql_where=_RUNNING_WITH_RESOURCE)
    op.create_table(
        "rounds",
        sa.Column("job_id", sa.String(40), sa.ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("idx", sa.Integer, primary_key=True),
        sa.Column("technique", sa.String(200), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(40), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_events_job", "events", ["job_id", "id"])
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("secret_hash", sa.String(128), nullable=False),
        sa.Column("scopes", sa.String(100), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("revoked_at", sa.Float, nullable=True),
    )
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("cron", sa.String(200), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("job_request", sa.Text, nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("misfire_grace_seconds", sa.Integer, nullable=False),
        sa.Column("catch_up", sa.String(16), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("last_fire_at", sa.Float, nullable=True),
    )
    op.create_table(
        "schedule_fires",
        sa.Column("schedule_id", sa.String(40), sa.ForeignKey("schedules.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("fire_at", sa.Float, primary_key=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("job_id", sa.String(40), nullable=True),
        sa.Column("instance", sa.String(80), nullable=False),
        sa.Column("recorded_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    for table in ("schedule_fires", "schedules", "api_keys", "events", "rounds", "jobs"):
        op.drop_table(table)
