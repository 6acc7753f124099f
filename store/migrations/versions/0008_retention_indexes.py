"""Indexes for the housekeeping purges and a table's replay.

``ix_pn_events_table`` (table_id, event_id): an SSE replay of one quiet table
(``events_of_table_after``) read the whole log without it.
``ix_pn_events_created``, ``ix_pn_spark_commits_processed``,
``ix_pn_expectation_checks_checked``: the oldest-first batches of the
housekeeping purges (store/housekeeping.py) read only what they delete.
The counter ``log-purged-below`` in ``pn_sequence``: every event id below it
may have been purged from the log (an SSE resume from before it gets 410).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_pn_events_table", "pn_events", ["table_id", "event_id"])
    op.create_index("ix_pn_events_created", "pn_events", ["created_at"])
    op.create_index("ix_pn_spark_commits_processed", "pn_spark_commits", ["processed_at"])
    op.create_index(
        "ix_pn_expectation_checks_checked", "pn_expectation_checks", ["checked_at"]
    )
    op.execute("INSERT INTO pn_sequence (name, next_value) VALUES ('log-purged-below', 1)")


def downgrade() -> None:
    op.execute("DELETE FROM pn_sequence WHERE name = 'log-purged-below'")
    op.drop_index("ix_pn_expectation_checks_checked", "pn_expectation_checks")
    op.drop_index("ix_pn_spark_commits_processed", "pn_spark_commits")
    op.drop_index("ix_pn_events_created", "pn_events")
    op.drop_index("ix_pn_events_table", "pn_events")
