"""serve's housekeeping deletes retired and aborted data files: what it removed.

``pn_revision_files.removed_at``: when the file was deleted (or found gone), so
a snapshot listing it fails instead of reading less; ``remove_failures``:
failed deletions, bounded (revisions/vacuum.py). ``pn_revision_replacements
.committed_at``: when the overwrite committed (its retired files go
``PN_RETIRED_FILE_RETENTION_SECONDS`` after); ``vacuumed_at``: when its retired
files were dealt with. Rows from before this revision get ``committed_at`` when
housekeeping first sees their overwrite committed: their retention starts then.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pn_revision_files") as batch:
        batch.add_column(sa.Column("removed_at", sa.Float, nullable=True))
        batch.add_column(sa.Column("remove_failures", sa.Integer, nullable=False,
                                   server_default="0"))
        batch.create_index("ix_pn_revision_files_partition", ["table_name", "partition"])
    with op.batch_alter_table("pn_revision_replacements") as batch:
        batch.add_column(sa.Column("committed_at", sa.Float, nullable=True))
        batch.add_column(sa.Column("vacuumed_at", sa.Float, nullable=True))
        batch.create_index("ix_pn_revision_replacements_vacuum", ["vacuumed_at", "committed_at"])


def downgrade() -> None:
    with op.batch_alter_table("pn_revision_replacements") as batch:
        batch.drop_index("ix_pn_revision_replacements_vacuum")
        batch.drop_column("vacuumed_at")
        batch.drop_column("committed_at")
    with op.batch_alter_table("pn_revision_files") as batch:
        batch.drop_index("ix_pn_revision_files_partition")
        batch.drop_column("remove_failures")
        batch.drop_column("removed_at")
