"""Durable consumer cursors: scheduler event triggers and the Airflow push sink.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pn_consumer_cursors",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("event_id", sa.BigInteger, nullable=False),
        sa.Column("pending_event_id", sa.BigInteger),
        sa.Column("pending_since", sa.Float),
        sa.Column("lease_owner", sa.String(128)),
        sa.Column("lease_until", sa.Float),
        sa.Column("updated_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("pn_consumer_cursors")
