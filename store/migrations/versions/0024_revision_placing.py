"""``pn_revision_placing``: the writes whose placement began and has not finished.

The refusal to abort an overwrite whose files are (being) placed read the retirement
rows (written with the lease's release) and the table's lease naming the write. A
write that died mid-placement, some of the partition's files already moved aside, had
neither once another write took its expired lease over: its abort was accepted and
its moved files stayed aside for a revision no snapshot includes. A row here is taken
with the lease, before any rename, and deleted with the release that records the
rows (revisions/placement.py).

A store upgraded with a lease in its table has a placement under way or cut short:
its holder gets a row (at the revision its recorded files have), so the refusal
holds for it too; whether it is an overwrite is not known here, so it counts as one
(housekeeping keeps its files till its recovery rather than risk an overwrite's).

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pn_revision_placing",
        sa.Column("table_name", sa.String(260), primary_key=True),
        sa.Column("write_id", sa.String(64), primary_key=True),
        sa.Column("revision", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("began_at", sa.Float, nullable=False),
        sa.Column("retiring", sa.Boolean, nullable=False),
    )
    op.create_index("ix_pn_revision_placing_revision", "pn_revision_placing",
                    ["table_name", "revision"])
    op.get_bind().execute(sa.text(
        "INSERT INTO pn_revision_placing (table_name, write_id, revision, began_at, retiring) "
        "SELECT p.table_name, p.holder, max(f.revision), min(p.acquired_at), :retiring "
        "FROM pn_revision_placements p JOIN pn_revision_files f"
        " ON f.table_name = p.table_name AND f.write_id = p.holder "
        "GROUP BY p.table_name, p.holder"), {"retiring": True})


def downgrade() -> None:
    op.drop_index("ix_pn_revision_placing_revision", table_name="pn_revision_placing")
    op.drop_table("pn_revision_placing")
