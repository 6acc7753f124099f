"""Initial schema: tables, partitions, event log, sequences, set-done retention.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_big_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "pn_tables",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("db", sa.String(128), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("partition_keys", sa.JSON, nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("topic_override", sa.String(249)),
        sa.Column("retention_seconds", sa.BigInteger, nullable=False),
        sa.Column("location", sa.Text),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ux_pn_tables_db_name", "pn_tables", ["db", "name"], unique=True)
    op.create_table(
        "pn_partitions",
        sa.Column("id", _big_id, primary_key=True, autoincrement=True),
        sa.Column(
            "table_id",
            sa.Integer,
            sa.ForeignKey("pn_tables.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("spec", sa.String(2000), nullable=False),
        sa.Column("values", sa.JSON, nullable=False),
        sa.Column("location", sa.Text),
        sa.Column("revision", sa.BigInteger),
        sa.Column("event_id", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index(
        "ux_pn_partitions_table_spec", "pn_partitions", ["table_id", "spec"], unique=True
    )
    op.create_table(
        "pn_events",
        sa.Column("event_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("topic_seq", sa.BigInteger, nullable=False),
        sa.Column("event_type", sa.String(32), nullable=False),
        sa.Column("table_id", sa.Integer, nullable=False),
        sa.Column("message_id", sa.String(64), nullable=False, unique=True),
        sa.Column("headers", sa.JSON, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("published_at", sa.Float),
        sa.Column("lease_owner", sa.String(128)),
        sa.Column("lease_until", sa.Float),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_error", sa.Text),
    )
    op.create_index("ux_pn_events_topic_seq", "pn_events", ["topic", "topic_seq"], unique=True)
    op.create_index("ix_pn_events_unpublished", "pn_events", ["published_at", "event_id"])
    op.create_table(
        "pn_sequence",
        sa.Column("name", sa.String(260), primary_key=True),
        sa.Column("next_value", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(
        sa.table(
            "pn_sequence", sa.column("name", sa.String), sa.column("next_value", sa.BigInteger)
        ),
        [{"name": "event", "next_value": 1}],
    )
    op.create_table(
        "pn_set_done",
        sa.Column("id", _big_id, primary_key=True, autoincrement=True),
        sa.Column(
            "table_id",
            sa.Integer,
            sa.ForeignKey("pn_tables.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("spec", sa.String(2000), nullable=False),
        sa.Column("event_id", sa.BigInteger, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("published_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )
    op.create_index("ix_pn_set_done_lookup", "pn_set_done", ["table_id", "spec", "expires_at"])
    op.create_index("ix_pn_set_done_history", "pn_set_done", ["table_id", "published_at"])
    op.create_index("ix_pn_set_done_expiry", "pn_set_done", ["expires_at"])


def downgrade() -> None:
    op.drop_table("pn_set_done")
    op.drop_table("pn_sequence")
    op.drop_table("pn_events")
    op.drop_table("pn_partitions")
    op.drop_table("pn_tables")
