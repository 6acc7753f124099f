"""Reopen remote overwrites an older ``serve`` marked vacuumed without deleting anything.

Before ``vacuum_retired`` (writers/vacuum.py) existed, ``serve``'s housekeeping set
``pn_revision_replacements.vacuumed_at`` on the overwrites of tables whose location
it could not reach (``hdfs://``, ``s3a://``, ...), deleting nothing; the Spark job
only takes rows not vacuumed, so those retired files stayed for ever. The rows do
not record a location; the catalog's (``pn_tables.location``) is what that
``serve`` looked at. Reopened: an overwrite of a table whose location has a scheme
other than ``file`` that still names a retired file neither removed nor given up.
A location without a scheme (a path on ``PN_DEFAULT_FS``) is left as it is: the
setting is not known here; 0022 reopens those, and those of moved tables, too.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

#: revisions/vacuum.py MAX_REMOVE_ATTEMPTS when this was written: a file given up.
_GIVEN_UP = 30
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def _remote(location: str) -> bool:
    found = _SCHEME.match(location)
    return found is not None and found.group(1).lower() != "file" and len(found.group(1)) > 1


def upgrade() -> None:
    conn = op.get_bind()
    tables = conn.execute(sa.text(
        "SELECT db, name, location FROM pn_tables WHERE location IS NOT NULL")).all()
    for db, name, location in tables:
        if not _remote(location):
            continue
        conn.execute(sa.text(
            "UPDATE pn_revision_replacements SET vacuumed_at = NULL "
            "WHERE table_name = :t AND vacuumed_at IS NOT NULL AND EXISTS ("
            " SELECT 1 FROM pn_revision_files f"
            " WHERE f.table_name = pn_revision_replacements.table_name"
            " AND f.partition = pn_revision_replacements.partition"
            " AND f.retired_to = pn_revision_replacements.retired_to"
            " AND f.revision < pn_revision_replacements.revision"
            " AND f.removed_at IS NULL AND f.remove_failures < :given_up)"),
            {"t": f"{db}.{name}", "given_up": _GIVEN_UP})


def downgrade() -> None:
    pass  # nothing to undo: reopened rows are what the current serve leaves open
