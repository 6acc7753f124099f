"""A SQLite store's ``-wal`` file shrinks back after a large transaction.

SQLite reuses its write-ahead log from the start after a checkpoint but keeps
the file at its largest size: one large transaction (a Spark job announcing
many partitions, a migration, a backlog purge) left ``store.db-wal`` that big
for as long as ``serve`` ran. ``journal_size_limit`` truncates it when it is
reused. Real SQLite file, the real publisher.
"""

from __future__ import annotations

import os
from pathlib import Path

from partition_notify.store.engine import SQLITE_WAL_LIMIT_BYTES
from sqlalchemy import text

from partition_notify.app import build_app

#: Rows of ~2 KB in one transaction: a log well past the limit.
ROWS = 100_000
_SEED = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count) "
    "INSERT INTO pn_idempotency (principal, key, fingerprint, status, response, created_at, "
    "expires_at) SELECT 'p', 'k' || i, 'f', 201, hex(randomblob(1000)), 0, 1 FROM n")


def test_the_wal_is_truncated_to_its_limit_once_reused(tmp_path: Path) -> None:
    app = build_app(store_url=f"sqlite:///{tmp_path}/store.db", transport_url="embedded://")
    wal = tmp_path / "store.db-wal"
    try:
        app.publisher.register_table("db", "t", ["ds"])
        with app.store.engine.begin() as conn:
            conn.execute(text(_SEED), {"count": ROWS})
        peak = os.path.getsize(wal)
        assert peak > 2 * SQLITE_WAL_LIMIT_BYTES, peak  # the test's premise
        # The commit's automatic checkpoint copied the log into the database; the
        # next writers start the log over.
        for i in range(20):
            app.publisher.send_mark_set_done("db", "t", f"ds={i}")
        size = os.path.getsize(wal)
        assert size <= SQLITE_WAL_LIMIT_BYTES, (
            f"store.db-wal is {size >> 20} MiB after the log was reused "
            f"(peak {peak >> 20} MiB, limit {SQLITE_WAL_LIMIT_BYTES >> 20} MiB)")
    finally:
        app.close()
