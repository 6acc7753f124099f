"""A housekeeping pass over overwrites whose retired files were dealt with reads about none.

The rows of deleted retired files and their overwrites stay (a pinned snapshot
must learn that its files went), so they accumulate: every pass must find the
few overwrites still to do through ``ix_pn_revision_replacements_vacuum``, not
read all of them. 100,000 done rows on PostgreSQL, no ANALYZE, both plan modes.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Any

from partition_notify.revisions.vacuum import FileRemover, LocalFiles, remove_retired
from partition_notify.store import Store
from partition_notify.store.uow import UnitOfWork
from sqlalchemy import event, text

from tests.support.query_plans import rows_read

ROWS = 100_000
TABLE = "pn_revision_replacements"


def test_a_pass_over_dealt_with_overwrites_reads_about_none(pg_store: Store,
                                                            tmp_path: Path) -> None:
    now = time.time()
    with pg_store.engine.begin() as conn:
        conn.execute(text("INSERT INTO pn_revision_tables (table_name, last_revision, "
                          "created_at) VALUES ('d.t', :n, 0)"), {"n": ROWS})
        conn.execute(text(
            f"INSERT INTO {TABLE} (table_name, revision, write_id, partition, retired_to, "
            "committed_at, vacuumed_at) SELECT 'd.t', g, 'w' || g, 'ds=' || g, "
            "'_pn_retired/w' || g, :now - :n + g, :now FROM generate_series(1, :n) AS g"),
            {"now": now, "n": ROWS})
    sent: list[tuple[str, Any]] = []

    def grab(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if TABLE in statement:
            sent.append((statement, params))

    event.listen(pg_store.engine, "before_cursor_execute", grab)
    try:
        remove_retired(partial(UnitOfWork, pg_store.engine, write=True),
                       FileRemover(lambda _: LocalFiles(tmp_path)), now, now, batch_size=5000)
    finally:
        event.remove(pg_store.engine, "before_cursor_execute", grab)
    assert len(sent) == 2, sent  # dating pre-0017 commits, one batch
    for sql, params in sent:
        for mode in ("force_custom_plan", "force_generic_plan"):
            read = rows_read(pg_store, sql, params, mode, TABLE)
            assert read <= 100, f"{mode}: read {read} rows of {TABLE}: {sql}"
