"""Reopen what 0020 could not see: overwrites marked vacuumed with files never deleted.

0020 reopened the overwrites an older ``serve`` marked vacuumed without deleting
anything only for tables whose *current* location has a scheme other than ``file``.
Two kinds stayed closed, their retired files kept for ever:

* a schemeless location on ``PN_DEFAULT_FS`` (``/wh/orders`` with ``hdfs://nn``):
  the setting is not known here; any process that opens the store may run this
  (``serve``, the CLI, a Spark job), with or without it in its environment;
* a table whose location changed since: that ``serve`` looked at the old one, the
  rows do not record it.

Neither needs the location: the current ``serve`` marks an overwrite vacuumed only
once every retired file it hid is removed (or already gone) or given up, so one
marked vacuumed that still names a retired file neither removed nor given up is one
an older ``serve`` skipped. All such are reopened; whoever deletes in the table's
location now takes them: ``serve`` for a local one (inside the location only, a file
already gone counts as removed), ``vacuum_retired`` (writers/vacuum.py) elsewhere.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

#: revisions/vacuum.py MAX_REMOVE_ATTEMPTS when this was written: a file given up.
_GIVEN_UP = 30


def upgrade() -> None:
    op.get_bind().execute(sa.text(
        "UPDATE pn_revision_replacements SET vacuumed_at = NULL "
        "WHERE vacuumed_at IS NOT NULL AND EXISTS ("
        " SELECT 1 FROM pn_revision_files f"
        " WHERE f.table_name = pn_revision_replacements.table_name"
        " AND f.partition = pn_revision_replacements.partition"
        " AND f.retired_to = pn_revision_replacements.retired_to"
        " AND f.revision < pn_revision_replacements.revision"
        " AND f.removed_at IS NULL AND f.remove_failures < :given_up)"),
        {"given_up": _GIVEN_UP})


def downgrade() -> None:
    pass  # nothing to undo: reopened rows are what the current serve leaves open
