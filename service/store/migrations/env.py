"""Alembic environment: migrations run on the connection the store hands over (see service.store.migrate)."""

from __future__ import annotations

from alembic import context

from service.store.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through the service (it migrates on start), not the alembic command")

context.configure(connection=connection, target_metadata=metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
