"""Iceberg and Delta tables followed by their commits (writers/lakehouse/schema.py).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pn_lakehouse_tables",
        sa.Column("table_id", sa.Integer, primary_key=True),
        sa.Column("format", sa.String(16), nullable=False),
        sa.Column("catalog", sa.String(128)),
        sa.Column("identifier", sa.String(512)),
        sa.Column("location", sa.String(2048)),
        sa.Column("cursor", sa.BigInteger),
        sa.Column("gaps", sa.Integer, nullable=False, server_default="0"),
        sa.Column("lease_owner", sa.String(128)),
        sa.Column("lease_until", sa.Float),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("ix_pn_lakehouse_tables_format", "pn_lakehouse_tables", ["format"])


def downgrade() -> None:
    op.drop_index("ix_pn_lakehouse_tables_format", "pn_lakehouse_tables")
    op.drop_table("pn_lakehouse_tables")
