"""Alembic migrations, run programmatically when the service starts (and by `sglang-tuner keys`)."""

from __future__ import annotations

import logging
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from service.logs import get_logger

log = get_logger(__name__)

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config for the project's migrations, bound to an open connection when given."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade_to_head(connection: Connection) -> None:
    """Apply every pending migration inside the caller's transaction; logs once when the schema changed."""
    # Alembic's own INFO lines repeat on every start; one line of ours says what changed.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    before = MigrationContext.configure(connection).get_current_revision()
    command.upgrade(alembic_config(connection), "head")
    after = MigrationContext.configure(connection).get_current_revision()
    if after != before:
        log.info("schema_migrated", from_revision=before, to_revision=after)


def is_at_head(connection: Connection) -> bool:
    """Whether the database schema is at the newest migration."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    return MigrationContext.configure(connection).get_current_revision() == head
