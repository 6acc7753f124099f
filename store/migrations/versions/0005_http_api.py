"""HTTP API tokens and idempotency keys; partition expectations and their checks.

Revision ID: 0005
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0002"
branch_labels = None
depends_on = None

_big_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "pn_api_tokens",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("revoked_at", sa.Float),
    )
    op.create_table(
        "pn_idempotency",
        sa.Column("id", _big_id, primary_key=True, autoincrement=True),
        sa.Column("principal", sa.String(128), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
        sa.Column("response", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )
    op.create_index("ux_pn_idempotency_key", "pn_idempotency", ["principal", "key"], unique=True)
    op.create_index("ix_pn_idempotency_expiry", "pn_idempotency", ["expires_at"])
    op.create_table(
        "pn_expectations",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "table_id",
            sa.Integer,
            sa.ForeignKey("pn_tables.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("spec_template", sa.String(1000), nullable=False),
        sa.Column("cron", sa.String(128), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("deadline", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index(
        "ux_pn_expectations_table_name", "pn_expectations", ["table_id", "name"], unique=True
    )
    op.create_table(
        "pn_expectation_checks",
        sa.Column("id", _big_id, primary_key=True, autoincrement=True),
        sa.Column(
            "expectation_id",
            sa.Integer,
            sa.ForeignKey("pn_expectations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("logical_date", sa.String(40), nullable=False),
        sa.Column("spec", sa.String(2000), nullable=False),
        sa.Column("deadline_at", sa.Float, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("late_event_id", sa.BigInteger),
        sa.Column("recovered_event_id", sa.BigInteger),
        sa.Column("checked_at", sa.Float, nullable=False),
        sa.Column("recovered_at", sa.Float),
    )
    op.create_index(
        "ux_pn_expectation_checks_instance",
        "pn_expectation_checks",
        ["expectation_id", "logical_date"],
        unique=True,
    )
    op.create_index(
        "ix_pn_expectation_checks_open", "pn_expectation_checks", ["outcome", "recovered_at"]
    )


def downgrade() -> None:
    op.drop_table("pn_expectation_checks")
    op.drop_table("pn_expectations")
    op.drop_table("pn_idempotency")
    op.drop_table("pn_api_tokens")
