"""Spark commits already announced (the commit protocol's idempotency record).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pn_spark_commits",
        sa.Column("job_id", sa.String(128), primary_key=True),
        sa.Column("table_id", sa.Integer, nullable=False),
        sa.Column("partitions", sa.Integer, nullable=False),
        sa.Column("processed_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("pn_spark_commits")
