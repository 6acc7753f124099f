"""Migration 0021 on a populated 0020 log (real SQLite and PostgreSQL).

On SQLite it rebuilds ``pn_events`` so that ``event_id`` is the rowid: the
separate primary-key b-tree (``sqlite_autoindex_pn_events_1``) is gone, every
row and column is kept, every named index is back as it was, and the store
publishes, leases, reads and purges as before. PostgreSQL is left as it was.
"""

from __future__ import annotations

from typing import Any

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from partition_notify.store import Store
from partition_notify.store.migrate import _SCRIPTS, migrate
from sqlalchemy import Connection, Engine, create_engine, text

from partition_notify.app import build_app
from tests.store.helpers import append_raw_event, snapshot


def _cfg(conn: Connection) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(_SCRIPTS))
    cfg.attributes["connection"] = conn
    return cfg


def _schema(engine: Engine) -> dict[str, Any]:
    """pn_events' indexes: SQLite's DDL and autoindex origins, PostgreSQL's definitions."""
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            return {"indexes": sorted(conn.execute(text(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'pn_events'")))}
        named = sorted(conn.execute(text(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
            "AND tbl_name = 'pn_events' AND sql IS NOT NULL")))
        origins = sorted(r[3] for r in conn.execute(text("PRAGMA index_list(pn_events)"))
                         if r[3] != "c")
        id_type = next(r[2] for r in conn.execute(text("PRAGMA table_info(pn_events)"))
                       if r[1] == "event_id")
        return {"indexes": named, "origins": origins, "id_type": id_type}


def _populate_at_0020(store_url: str, engine: Engine) -> None:
    """Published events and a set-done through the app, then, at 0020, an unpublished,
    a retried (leased) and a dead one written as a 0020 writer would."""
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        pub = app.publisher
        pub.register_table("sales", "orders", ["ds"])
        pub.announce_partitions("sales", "orders", [{"ds": str(d)} for d in range(1, 5)])
        pub.send_mark_set_done("sales", "orders", {"ds": "1"})
        table_id = app.store.catalog.get_table("sales", "orders").id
    with engine.begin() as conn:
        command.downgrade(_cfg(conn), "0020")
    ids = [append_raw_event(engine, topic="t.raw", table_id=table_id, body=f"b{n}",
                            headers={"n": str(n)}) for n in range(3)]
    with engine.begin() as conn:
        conn.execute(text("UPDATE pn_events SET published_at = NULL WHERE event_id IN "
                          "(:a, :b, :c)"), {"a": ids[0], "b": ids[1], "c": ids[2]})
        conn.execute(text("UPDATE pn_events SET retry_at = 1e12, rejections = 1, attempts = 2, "
                          "last_error = 'refused', lease_owner = 'r0', lease_until = 9.25 "
                          "WHERE event_id = :e"), {"e": ids[1]})
        conn.execute(text("UPDATE pn_events SET dead_at = 8.5, rejections = 3, "
                          "last_error = 'not authorized' WHERE event_id = :e"), {"e": ids[2]})


def test_migration_0021_makes_event_id_the_rowid_and_keeps_every_row(
        store_url: str, tmp_path: Any) -> None:
    engine = create_engine(store_url)
    try:
        _populate_at_0020(store_url, engine)
        before_rows, before = snapshot(engine), _schema(engine)
        migrate(engine)
        after_rows, after = snapshot(engine), _schema(engine)
        with engine.connect() as conn:
            version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            if conn.dialect.name == "sqlite":
                check = conn.execute(text("PRAGMA integrity_check")).scalars().all()
                aliased = conn.execute(text(
                    "SELECT count(*) FROM pn_events WHERE rowid <> event_id")).scalar()
                assert check == ["ok"] and aliased == 0
    finally:
        engine.dispose()
    # At the head: 0021 and every later migration ran on the rebuilt table.
    assert version == ScriptDirectory(str(_SCRIPTS)).get_current_head()
    assert after_rows == before_rows and len(before_rows["pn_events"]) == 8
    # Every index as it was, but the one 0023 drops (tests/store/test_events_created_index.py).
    assert after["indexes"] == [i for i in before["indexes"] if i[0] != "ix_pn_events_created"]
    assert len(after["indexes"]) == len(before["indexes"]) - 1
    if store_url.startswith("sqlite"):
        assert len(after["indexes"]) == 5
        # 0020: a primary-key b-tree besides message_id's; 0021: message_id's only.
        assert (before["origins"], before["id_type"]) == (["pk", "u"], "BIGINT")
        assert (after["origins"], after["id_type"]) == (["u"], "INTEGER")
        for revision, expected in (("0020", before), ("head", after)):
            fresh = create_engine(f"sqlite:///{tmp_path}/fresh{revision}.db")
            try:
                migrate(fresh, revision)
                # Down to 0020 gives 0020's own table back; up, a new log's twin.
                assert _schema(fresh) == expected, revision
            finally:
                fresh.dispose()
    _still_works(store_url, after_rows["pn_events"])


def _still_works(store_url: str, rows: list[tuple[Any, ...]]) -> None:
    last = rows[-1][0]
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        sent = app.publisher.announce_partitions("sales", "orders", [{"ds": "9"}])
        assert [m.event_id for m in sent] == [last + 1], "ids go on without a gap"
        store = Store(app.store.engine)
        assert [e.event_id for e in store.log.events_after(last - 1)] == [last, last + 1]
        # The unpublished one is leased; the retried one waits; the dead one is out.
        assert [e.event_id for e in store.log.lease_unpublished("r", 100, 30)] == [last - 2]
        purged = store.housekeeping.purge_events(1e12, batch_size=2)
        assert purged == 5, "the table topic's published events but its newest"
        with app.store.engine.connect() as conn:
            left = conn.execute(text("SELECT count(*) FROM pn_events")).scalar()
        assert left == len(rows) + 1 - purged
