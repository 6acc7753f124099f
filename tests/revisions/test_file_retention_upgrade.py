"""Migration 0017 on a store with an overwrite from before it (real SQLite and PostgreSQL).

Rows written before 0017 carry no commit time: their retired files must not go at
the first housekeeping pass after the upgrade (that would break every pinned
reader at once), but a full retention after housekeeping first saw them committed.
Down to 0016 and up again keeps the rows.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from partition_notify.app import build_app
from partition_notify.serve.housekeeping import purge_all
from tests.support.clock import FakeClock
from tests.support.migrations import downgraded

T = "sales.orders"
RETENTION = 7 * 86400


def _at_0016_with_an_old_overwrite(store_url: str, root: Path) -> None:
    with downgraded(store_url, "0016") as conn:
        conn.execute(text("INSERT INTO pn_revision_tables (table_name, last_revision, "
                          "created_at) VALUES (:t, 2, 1.0)"), {"t": T})
        conn.execute(text("INSERT INTO pn_revision_files (table_name, revision, write_id, "
                          "partition, name, retired_to) VALUES (:t, 1, 'w1', 'ds=1', "
                          "'part-w1.parquet', '_pn_retired/w2'), (:t, 2, 'w2', 'ds=1', "
                          "'part-w2.parquet', NULL)"), {"t": T})
        conn.execute(text("INSERT INTO pn_revision_replacements (table_name, revision, "
                          "write_id, partition, retired_to) VALUES (:t, 2, 'w2', 'ds=1', "
                          "'_pn_retired/w2')"), {"t": T})
    (root / "ds=1" / "_pn_retired" / "w2").mkdir(parents=True)
    (root / "ds=1" / "_pn_retired" / "w2" / "part-w1.parquet").write_bytes(b"old")
    (root / "ds=1" / "part-w2.parquet").write_bytes(b"new")


def test_an_overwrite_from_before_0017_keeps_its_files_a_retention_after_the_upgrade(
        store_url: str, tmp_path: Path) -> None:
    root = tmp_path / "orders"
    retired = root / "ds=1" / "_pn_retired" / "w2" / "part-w1.parquet"
    clock = FakeClock(1_800_000_000.0)
    with build_app(store_url=store_url, transport_url="embedded://", clock=clock) as app:
        app.publisher.register_table("sales", "orders", ["ds"], location=str(root))
    _at_0016_with_an_old_overwrite(store_url, root)
    with build_app(store_url=store_url, transport_url="embedded://", clock=clock) as app:
        purge_all(app, 10, None)
        assert retired.exists(), "the first pass only dates the old overwrite"
        clock.advance(RETENTION - 10)
        purge_all(app, 10, None)
        assert retired.exists()
        clock.advance(20)
        assert purge_all(app, 10, None).revision_files == 1
        assert not retired.exists() and (root / "ds=1" / "part-w2.parquet").exists()
