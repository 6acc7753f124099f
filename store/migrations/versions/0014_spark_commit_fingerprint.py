"""A recorded Spark job's content fingerprint: one job id, one commit.

``pn_spark_commits.fingerprint``: SHA-256 of what the job announced
(writers/commit_identity.py). A manifest whose job id is recorded with another
fingerprint is refused (``JobIdReusedError``) instead of being answered
``duplicate``, which dropped the second job's partitions silently. Jobs
recorded before this revision have none and stay duplicates.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pn_spark_commits") as batch:
        batch.add_column(sa.Column("fingerprint", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pn_spark_commits") as batch:
        batch.drop_column("fingerprint")
