"""When a recorded Spark job committed and which partitions it cleared: commit order.

``pn_spark_commits.committed_at_ms``: the job's ``committedAtMs``;
``pn_spark_commits.cleared``: JSON list of the (partial) partition specs the job
removed wholesale (a static overwrite's deleted prefixes, an ``ALTER TABLE ... DROP
PARTITION``'s specs). A manifest applied after a newer one (a spool picked up late)
announces nothing such a newer job cleared or wrote again
(writers/commit_order.py). Jobs recorded before this revision have neither.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pn_spark_commits") as batch:
        batch.add_column(sa.Column("committed_at_ms", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("cleared", sa.Text, nullable=True))
        batch.create_index("ix_pn_spark_commits_table_time", ["table_id", "committed_at_ms"])


def downgrade() -> None:
    with op.batch_alter_table("pn_spark_commits") as batch:
        batch.drop_index("ix_pn_spark_commits_table_time")
        batch.drop_column("cleared")
        batch.drop_column("committed_at_ms")
