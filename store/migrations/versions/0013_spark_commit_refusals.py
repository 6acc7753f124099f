"""Spark commits the HTTP route rejected or ignored, with the reason (/ui operations page).

``writers/commit_refusals.py``: at most 10,000 rows (a write deletes beyond),
purged by ``serve``'s housekeeping after ``PN_SPARK_COMMIT_RETENTION_SECONDS``.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pn_spark_commit_refusals",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                  primary_key=True, autoincrement=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("job_id", sa.String(128)),
        sa.Column("table", sa.String(300)),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("principal", sa.String(128), nullable=False),
        sa.Column("at", sa.Float, nullable=False),
    )
    op.create_index("ix_pn_spark_commit_refusals_at", "pn_spark_commit_refusals", ["at"])


def downgrade() -> None:
    op.drop_index("ix_pn_spark_commit_refusals_at", "pn_spark_commit_refusals")
    op.drop_table("pn_spark_commit_refusals")
