"""The partition board's read: a table's newest partitions.

``ix_pn_partitions_recent`` (table_id, created_at, id): the ``/ui`` board
(``StatusReadRepository.recent_partitions``) reads a table's newest
partitions; with only (table_id, spec) the database sorted every partition
of the table on each render (bench/ui_render.py). The tables overview's last
add-partition per table (``max(created_at)``) reads the same index.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_pn_partitions_recent", "pn_partitions",
                    ["table_id", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_pn_partitions_recent", "pn_partitions")
