"""Completeness rules, their inputs and firings (partition_notify/rules/schema.py).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "pn_rules",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("table_id", sa.Integer, sa.ForeignKey("pn_tables.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("params", sa.JSON, nullable=False),
        sa.Column("cursor_event_id", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ux_pn_rules_table_name", "pn_rules", ["table_id", "name"], unique=True)
    op.create_table(
        "pn_rule_inputs",
        sa.Column("id", _BIG_ID, primary_key=True, autoincrement=True),
        sa.Column("rule_id", sa.Integer, sa.ForeignKey("pn_rules.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("spec", sa.String(2000), nullable=False),
        sa.Column("label", sa.String(300), nullable=False),
        sa.Column("input_table", sa.String(260), nullable=False),
        sa.Column("event_id", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ux_pn_rule_inputs_label", "pn_rule_inputs", ["rule_id", "spec", "label"],
                    unique=True)
    op.create_index("ix_pn_rule_inputs_created", "pn_rule_inputs", ["created_at"])
    op.create_table(
        "pn_rule_firings",
        sa.Column("id", _BIG_ID, primary_key=True, autoincrement=True),
        sa.Column("rule_id", sa.Integer, sa.ForeignKey("pn_rules.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("spec", sa.String(2000), nullable=False),
        sa.Column("event_id", sa.BigInteger),
        sa.Column("fired_at", sa.Float, nullable=False),
    )
    op.create_index("ux_pn_rule_firings_spec", "pn_rule_firings", ["rule_id", "spec"],
                    unique=True)
    op.create_index("ix_pn_rule_firings_fired", "pn_rule_firings", ["fired_at"])


def downgrade() -> None:
    op.drop_table("pn_rule_firings")
    op.drop_table("pn_rule_inputs")
    op.drop_table("pn_rules")
