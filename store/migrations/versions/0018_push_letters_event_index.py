"""An index on ``pn_push_dead_letters.event_id``.

The event log's purge keeps the event of every push dead letter nobody discarded
(store/housekeeping.py), and the letters' purge drops letters whose event is gone
(store/push_letters.py): both look letters up by event id, which the primary key
(sink, event_id) cannot serve. Without it SQLite scanned every letter once per
event the purge considered.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pn_push_dead_letters") as batch:
        batch.create_index("ix_pn_push_dead_letters_event", ["event_id"])


def downgrade() -> None:
    with op.batch_alter_table("pn_push_dead_letters") as batch:
        batch.drop_index("ix_pn_push_dead_letters_event")
