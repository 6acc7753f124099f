"""SQLite: ``pn_events.event_id`` becomes the table's rowid (INTEGER PRIMARY KEY).

Declared BIGINT, the primary key was not SQLite's rowid alias: every event row
went into the table's rowid b-tree *and* a separate primary-key index
(``sqlite_autoindex_pn_events_1``), one more page written per commit on the
publish path (issue #20, bench/durable_profile.py pages). SQLite cannot change a
column's type in place, so the table is rebuilt (its documented 12-step
procedure): new table, rows copied in event_id order, old one dropped, new one
renamed, the indexes recreated from the definitions the old table carried. It
runs inside the migration's transaction: a failure leaves the 0020 table as it
was. Time and space are those of one copy of the log (docs/architecture.md).
PostgreSQL is unchanged: its BIGINT primary key already is the table's one index
on event_id.

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_COLUMNS = ("event_id, topic, topic_seq, event_type, table_id, message_id, headers, body, "
            "created_at, published_at, lease_owner, lease_until, attempts, last_error, "
            "rejections, retry_at, dead_at, discarded_at")


def _table(id_type: str) -> str:
    # Column for column the 0020 table (0001 + 0003), but for event_id's type.
    return (
        f"CREATE TABLE pn_events_rebuilt (event_id {id_type} NOT NULL, "
        "topic VARCHAR(249) NOT NULL, topic_seq BIGINT NOT NULL, "
        "event_type VARCHAR(32) NOT NULL, table_id INTEGER NOT NULL, "
        "message_id VARCHAR(64) NOT NULL, headers JSON NOT NULL, body TEXT NOT NULL, "
        "created_at FLOAT NOT NULL, published_at FLOAT, lease_owner VARCHAR(128), "
        "lease_until FLOAT, attempts INTEGER DEFAULT '0' NOT NULL, last_error TEXT, "
        "rejections INTEGER DEFAULT '0' NOT NULL, retry_at FLOAT, dead_at FLOAT, "
        "discarded_at FLOAT, PRIMARY KEY (event_id), UNIQUE (message_id))")


def _rebuild(id_type: str) -> None:
    conn = op.get_bind()
    if conn.dialect.name != "sqlite":
        return
    # The named indexes exactly as they are (partial ones with their WHERE);
    # the autoindexes (primary key, message_id) come with the new table.
    indexes = [sql for (sql,) in conn.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'pn_events' "
        "AND sql IS NOT NULL ORDER BY name")]
    conn.exec_driver_sql(_table(id_type))
    conn.exec_driver_sql(f"INSERT INTO pn_events_rebuilt ({_COLUMNS}) "
                         f"SELECT {_COLUMNS} FROM pn_events ORDER BY event_id")
    conn.exec_driver_sql("DROP TABLE pn_events")
    conn.exec_driver_sql("ALTER TABLE pn_events_rebuilt RENAME TO pn_events")
    for sql in indexes:
        conn.exec_driver_sql(sql)


def upgrade() -> None:
    _rebuild("INTEGER")


def downgrade() -> None:
    _rebuild("BIGINT")
