"""Alembic environment: always handed a live connection by store.migrate."""

from __future__ import annotations

from alembic import context
from partition_notify.store.schema import Base

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
