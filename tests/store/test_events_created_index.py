"""Migration 0023 and the event-log purge without ``ix_pn_events_created`` (real SQLite
and PostgreSQL).

The purge reads the log in ``event_id`` order up to the last event created before
the horizon (a binary search of primary-key look-ups, store/housekeeping.py). The
migration drops the index on a populated log and keeps every row; a downgrade
builds it back. A clock that stepped back never gets a younger event purged.
"""

from __future__ import annotations

import time
from typing import Any

from alembic import command
from partition_notify.store import Store
from partition_notify.store.migrate import migrate
from sqlalchemy import Engine, create_engine, event, text

from partition_notify.app import build_app
from tests.store.helpers import snapshot
from tests.store.test_event_id_rowid import _cfg
from tests.support.query_plans import plan


def _has_index(engine: Engine) -> bool:
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            sql = "SELECT count(*) FROM pg_indexes WHERE indexname = 'ix_pn_events_created'"
        else:
            sql = "SELECT count(*) FROM sqlite_master WHERE name = 'ix_pn_events_created'"
        return bool(conn.execute(text(sql)).scalar())


def test_migration_0023_drops_the_index_and_keeps_every_row(store_url: str) -> None:
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        pub = app.publisher
        pub.register_table("sales", "orders", ["ds"])
        pub.announce_partitions("sales", "orders", [{"ds": str(d)} for d in range(1, 6)])
        pub.send_mark_set_done("sales", "orders", {"ds": "1"})
    engine = create_engine(store_url)
    try:
        with engine.begin() as conn:
            command.downgrade(_cfg(conn), "0022")
        assert _has_index(engine), "0022 has it"
        before = snapshot(engine)
        migrate(engine)
        assert not _has_index(engine)
        assert snapshot(engine) == before and len(before["pn_events"]) == 6
        with engine.begin() as conn:
            command.downgrade(_cfg(conn), "0022")
        assert _has_index(engine) and snapshot(engine) == before
        migrate(engine)
    finally:
        engine.dispose()
    store = Store.open(store_url)
    try:
        # Every published event of the table's topic but its newest.
        assert store.housekeeping.purge_events(1e12, batch_size=2) == 5
    finally:
        store.close()


def _insert(store: Store, rows: list[tuple[int, str, float]]) -> None:
    """Published events (id, topic, created_at); each topic's sequence in id order."""
    with store.engine.begin() as conn:
        for event_id, topic, created in rows:
            conn.execute(text(
                "INSERT INTO pn_events (event_id, topic, topic_seq, event_type, table_id, "
                "message_id, headers, body, created_at, published_at, attempts, rejections) "
                "VALUES (:e, :t, :e, 'SET_DONE', 1, :m, '{}', 'x', :c, :c, 0, 0)"),
                {"e": event_id, "t": topic, "m": f"m{event_id}", "c": created})


def _left(store: Store) -> set[int]:
    with store.engine.connect() as conn:
        return {int(r[0]) for r in conn.execute(text("SELECT event_id FROM pn_events"))}


def test_a_clock_stepped_back_never_gets_a_younger_event_purged(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        t0 = time.time() - 10_000
        # Ids 1-20 a second apart, then the clock steps back 100 s: ids 21-40 carry
        # times before id 1's. The last event (41) keeps every topic's sequence going.
        rows = [(i, f"t{i % 2}", t0 + i) for i in range(1, 21)]
        rows += [(i, f"t{i % 2}", t0 - 100 + (i - 20)) for i in range(21, 41)]
        rows += [(41, "t1", t0 + 1000), (42, "t0", t0 + 1000)]
        _insert(store, rows)
        created = {e: c for e, _, c in rows}
        before = t0 + 10.5  # ids 1-10 and 21-40 were created before it
        store.housekeeping.purge_events(before, batch_size=3)
        gone = set(created) - _left(store)
        assert gone, "the events up to the bound went"
        assert all(created[e] < before for e in gone), sorted(gone)
        # Past the step, every event before the horizon goes (but each topic's newest).
        store.housekeeping.purge_events(t0 + 500, batch_size=3)
        assert _left(store) == {41, 42}
    finally:
        store.close()


def test_the_purge_reads_the_log_by_its_primary_key_on_sqlite(tmp_path: Any) -> None:
    """SQLite's plans of every statement of a run that reads pn_events: no full scan
    (PostgreSQL's: tests/store/test_purge_plans.py, rows read per statement)."""
    store = Store.open(f"sqlite:///{tmp_path}/store.db")
    try:
        now = time.time()
        _insert(store, [(i, f"t{i % 20}", now - 1000 + i) for i in range(1, 1001)])
        sent: list[tuple[str, Any]] = []

        def grab(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
            if "pn_events" in statement:
                sent.append((statement, params))

        event.listen(store.engine, "before_cursor_execute", grab)
        try:
            assert store.housekeeping.purge_events(now - 500, batch_size=100) == 499
        finally:
            event.remove(store.engine, "before_cursor_execute", grab)
        plans = {sql: plan(store, sql, params) for sql, params in sent}
        assert any(sql.lstrip().upper().startswith("DELETE") for sql in plans)
        for sql, text_ in plans.items():
            assert "SCAN pn_events" not in text_, (sql, text_)
            assert "ix_pn_events_unpublished" not in text_, (sql, text_)
    finally:
        store.close()
