"""Push dead letters: set-dones the Airflow push sink could not deliver for good.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pn_push_dead_letters",
        sa.Column("sink", sa.String(200), primary_key=True),
        sa.Column("event_id", sa.BigInteger, primary_key=True),
        sa.Column("table", sa.String(300), nullable=False),
        sa.Column("error", sa.Text, nullable=False),
        sa.Column("dead_at", sa.Float, nullable=False),
        sa.Column("redriven_at", sa.Float),
        sa.Column("sending_since", sa.Float),
        sa.Column("discarded_at", sa.Float),
    )


def downgrade() -> None:
    op.drop_table("pn_push_dead_letters")
