"""``pn_revision_placements``: the per-table placement lease of transactional writes.

Placing a write's files (writers/commit.py) held the table's revision row lock for
the renames: on SQLite the database's write lock, so every other write of the store
waited for them. The lease is a row taken and released in short transactions
(revisions/placement.py); a store upgraded from 0018 has no placement in flight
that holds one (the old lock ended with its process), so the table starts empty.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pn_revision_placements",
        sa.Column("table_name", sa.String(260), primary_key=True),
        sa.Column("holder", sa.String(64), nullable=False),
        sa.Column("token", sa.String(32), nullable=False),
        sa.Column("acquired_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("pn_revision_placements")
