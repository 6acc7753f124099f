"""Data files per revision and overwritten partitions: repeatable snapshot reads.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# SQLite gives rowid semantics only to INTEGER PRIMARY KEY.
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "pn_revision_files",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("table_name", sa.String(260), nullable=False),
        sa.Column("revision", sa.BigInteger, nullable=False),
        sa.Column("write_id", sa.String(64), nullable=False),
        sa.Column("partition", sa.String(2000), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("retired_to", sa.Text),
    )
    op.create_index("ix_pn_revision_files_revision", "pn_revision_files",
                    ["table_name", "revision"])
    op.create_index("ix_pn_revision_files_write", "pn_revision_files",
                    ["table_name", "write_id"])
    op.create_table(
        "pn_revision_replacements",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("table_name", sa.String(260), nullable=False),
        sa.Column("revision", sa.BigInteger, nullable=False),
        sa.Column("write_id", sa.String(64), nullable=False),
        sa.Column("partition", sa.String(2000), nullable=False),
        sa.Column("retired_to", sa.Text, nullable=False),
    )
    op.create_index("ix_pn_revision_replacements_revision", "pn_revision_replacements",
                    ["table_name", "revision"])
    op.create_index("ix_pn_revision_replacements_write", "pn_revision_replacements",
                    ["table_name", "write_id"])


def downgrade() -> None:
    op.drop_table("pn_revision_replacements")
    op.drop_table("pn_revision_files")
