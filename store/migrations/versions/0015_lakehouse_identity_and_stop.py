"""A followed table's identity and the commit it is stopped on (writers/lakehouse/schema.py).

``pn_lakehouse_tables.table_uuid``: the Delta ``metaData.id`` / Iceberg ``table-uuid`` of
the table the cursor belongs to; a table deleted and written again at the same place has
another one, so its new log is no longer taken for the old one's continuation.
``stopped_at`` and ``stopped_reason``: the commit the follower cannot announce and why, so
``lakehouse skip`` can move past exactly that one. Rows followed before this revision
have no identity until the follower reads them next.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pn_lakehouse_tables") as batch:
        batch.add_column(sa.Column("table_uuid", sa.String(64), nullable=True))
        batch.add_column(sa.Column("stopped_at", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("stopped_reason", sa.String(500), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pn_lakehouse_tables") as batch:
        batch.drop_column("stopped_reason")
        batch.drop_column("stopped_at")
        batch.drop_column("table_uuid")
