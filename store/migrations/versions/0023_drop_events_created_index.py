"""Drop ``ix_pn_events_created``: the event-log purge reads in ``event_id`` order.

The index (0008) served one query, the purge's oldest-first batches
(store/housekeeping.py). They now read the primary key up to the last event
created before the horizon, found by a binary search of primary-key look-ups:
ids are taken under the write lock and the clock read after them in the same
transaction, so ``created_at`` follows ``event_id``; each row is still checked
against the horizon, so a clock that stepped back never purges a younger event.
Every append wrote a page of this index (bench/durable_profile.py pages): one
b-tree fewer per commit. Downgrade rebuilds it.

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_pn_events_created", "pn_events")


def downgrade() -> None:
    op.create_index("ix_pn_events_created", "pn_events", ["created_at"])
