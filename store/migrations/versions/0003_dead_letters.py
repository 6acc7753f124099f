"""Dead letters: events the broker refused for good, quarantined off the relay's path.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pn_events") as batch:
        batch.add_column(sa.Column("rejections", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("retry_at", sa.Float, nullable=True))
        batch.add_column(sa.Column("dead_at", sa.Float, nullable=True))
        batch.add_column(sa.Column("discarded_at", sa.Float, nullable=True))
    # Partial indexes: only refused rows. A full one on dead_at (NULL on every
    # live row) made SQLite scan all pending rows on every lease.
    for name, column in (("ix_pn_events_retry", "retry_at"), ("ix_pn_events_dead", "dead_at")):
        where = sa.text(f"{column} IS NOT NULL")
        op.create_index(name, "pn_events", [column], sqlite_where=where, postgresql_where=where)


def downgrade() -> None:
    op.drop_index("ix_pn_events_dead", table_name="pn_events")
    op.drop_index("ix_pn_events_retry", table_name="pn_events")
    with op.batch_alter_table("pn_events") as batch:
        for name in ("discarded_at", "dead_at", "retry_at", "rejections"):
            batch.drop_column(name)
