"""Revision manager (counter, running and aborted transactions) and SNAPSHOT datasets.

Revision ID: 0002
Revises: 0001
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
        "pn_revision_tables",
        sa.Column("table_name", sa.String(260), primary_key=True),
        sa.Column("last_revision", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "pn_revision_families",
        sa.Column(
            "table_name",
            sa.String(260),
            sa.ForeignKey("pn_revision_tables.table_name", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("family", sa.String(128), primary_key=True),
        sa.Column("first_revision", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "pn_revision_txns",
        sa.Column(
            "table_name",
            sa.String(260),
            sa.ForeignKey("pn_revision_tables.table_name", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("revision", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("families", sa.JSON, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("keep_alive_seconds", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
        sa.Column("ended_at", sa.Float),
        sa.Column("reason", sa.String(16)),
    )
    op.create_index(
        "ix_pn_revision_txns_state", "pn_revision_txns", ["table_name", "state", "expires_at"]
    )
    op.create_table(
        "pn_snapshot_datasets",
        sa.Column("name", sa.String(260), primary_key=True),
        sa.Column("location", sa.Text, nullable=False),
        sa.Column("current_version", sa.BigInteger),
        sa.Column("ttl_seconds", sa.Float),
        sa.Column("min_versions", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_table(
        "pn_snapshot_versions",
        sa.Column(
            "dataset",
            sa.String(260),
            sa.ForeignKey("pn_snapshot_datasets.name", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("version", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("completed_at", sa.Float),
        sa.Column("superseded_at", sa.Float),
        sa.Column("error", sa.Text),
    )
    op.create_index("ix_pn_snapshot_versions_state", "pn_snapshot_versions", ["dataset", "state"])


def downgrade() -> None:
    op.drop_table("pn_snapshot_versions")
    op.drop_table("pn_snapshot_datasets")
    op.drop_table("pn_revision_txns")
    op.drop_table("pn_revision_families")
    op.drop_table("pn_revision_tables")
