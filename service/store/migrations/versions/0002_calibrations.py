"""Calibrations of a cost model, fitted on measured rounds.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "calibrations",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("model", sa.String(300), nullable=False),
        sa.Column("gpu", sa.String(100), nullable=False),
        sa.Column("sglang_version", sa.String(40), nullable=False),
        sa.Column("layout", sa.String(300), nullable=False),
        sa.Column("cost_model", sa.String(100), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_calibrations_key", "calibrations", ["model", "gpu", "sglang_version", "created_at"])


def downgrade() -> None:
    op.drop_table("calibrations")
