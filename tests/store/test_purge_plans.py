"""A purge batch reads about a batch of rows, not the whole table.

``serve`` purges every minute in batches (one transaction each). Without
statistics (a new store, autovacuum off) PostgreSQL estimated an unbounded
``expires_at <= now`` at a third of the table and read all of it for every
batch: a sequential scan and a top-N sort for the oldest ``n``, and another
sequential scan to delete them. Each purge's batch is captured as the product
sends it and explained by the database (no ANALYZE), under both plan modes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from partition_notify.store import Store
from partition_notify.store.idempotency import IdempotencyKeys
from sqlalchemy import event, text

from tests.support.query_plans import rows_read

ROWS = 100_000
BATCH = 5_000
#: The n oldest from the index (the event log: and one look-up each for a later event
#: of its topic), the same n by primary key to delete, and slack.
MOST = 3 * BATCH + 100


def _sent(store: Store, table: str, run: Callable[[], object]) -> list[tuple[str, Any, list[str]]]:
    """Each statement ``run()`` sent that names ``table``: its SQL, its parameters and
    the SET LOCALs sent since the previous one (they plan it)."""
    sent: list[tuple[str, Any, list[str]]] = []
    settings: list[str] = []

    def grab(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SET LOCAL"):
            settings.append(statement)
        elif table in statement:
            sent.append((statement, params, list(settings)))
            settings.clear()

    event.listen(store.engine, "before_cursor_execute", grab)
    try:
        run()
    finally:
        event.remove(store.engine, "before_cursor_execute", grab)
    return sent


def _batch(store: Store, table: str, purge: Callable[[], int]) -> tuple[str, Any, list[str]]:
    """The batch's DELETE, its parameters, and the SET LOCALs sent before it."""
    done: list[int] = []
    deletes = [s for s in _sent(store, table, lambda: done.append(purge()))
               if s[0].lstrip().upper().startswith("DELETE")]
    assert done == [BATCH]
    assert len(deletes) == 1, deletes
    return deletes[0]


def _assert_reads_a_batch(store: Store, table: str, purge: Callable[[], int]) -> None:
    sql, params, settings = _batch(store, table, purge)
    for mode in ("force_custom_plan", "force_generic_plan"):
        read = rows_read(store, sql, params, mode, table, settings)
        assert read <= MOST, f"{mode}: read {read} rows of {table} for a batch of {BATCH}: {sql}"


#: Half the rows expired, interleaved with the rest in id order.
_EXPIRY = ":now + CASE WHEN g % 2 = 0 THEN -g ELSE g END"


def test_a_set_done_purge_batch_reads_about_a_batch(pg_store: Store) -> None:
    now = time.time()
    with pg_store.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO pn_tables (id, db, name, partition_keys, topic, "
            "retention_seconds, created_at) VALUES (1, 'd', 't', '[\"a\"]', 'hcat.d.t', 1, 0)"))
        conn.execute(text(
            "INSERT INTO pn_set_done (table_id, spec, event_id, body, published_at, "
            f"expires_at) SELECT 1, 'a=' || g, g, 'b', :now - g, {_EXPIRY} "
            "FROM generate_series(1, :n) AS g"), {"now": now, "n": ROWS})
    _assert_reads_a_batch(pg_store, "pn_set_done", lambda: pg_store.retention.purge_expired(
        batch_size=BATCH, max_batches=1))


def test_an_idempotency_purge_batch_reads_about_a_batch(pg_store: Store) -> None:
    now = time.time()
    with pg_store.engine.begin() as conn:
        conn.execute(text(
            'INSERT INTO pn_idempotency (principal, "key", fingerprint, status, response, '
            f"created_at, expires_at) SELECT 'p', 'k' || g, 'f', 201, '{{}}', :now, {_EXPIRY} "
            "FROM generate_series(1, :n) AS g"), {"now": now, "n": ROWS})
    keys = IdempotencyKeys(pg_store)
    # One batch: the purge runs batches until one is short; stop it after the first.
    _assert_reads_a_batch(pg_store, "pn_idempotency", lambda: _first_batch(keys))


class _Stop(Exception):
    pass


def _first_batch(keys: IdempotencyKeys) -> int:
    def stop() -> None:
        raise _Stop

    with contextlib.suppress(_Stop):
        keys.purge(batch_size=BATCH, between_batches=stop)
    return BATCH


def _fill(store: Store, now: float, n: int) -> None:
    """``n`` set-done rows and ``n`` idempotency keys; the even ones expired (at or before now)."""
    with store.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO pn_tables (id, db, name, partition_keys, topic, "
            "retention_seconds, created_at) VALUES (1, 'd', 't', '[\"a\"]', 'hcat.d.t', 1, 0)"))
        for g in range(1, n + 1):
            at = now - g + 1 if g % 2 == 0 else now + g
            conn.execute(text(
                "INSERT INTO pn_set_done (table_id, spec, event_id, body, published_at, "
                "expires_at) VALUES (1, :spec, :g, 'b', 0, :at)"),
                {"spec": f"a={g}", "g": g, "at": at})
            conn.execute(text(
                'INSERT INTO pn_idempotency (principal, "key", fingerprint, status, response, '
                "created_at, expires_at) VALUES ('p', :key, 'f', 201, '{}', 0, :at)"),
                {"key": f"k{g}", "at": at})


def test_purges_delete_every_expired_row_and_no_other(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        now = store.clock()
        _fill(store, now, 41)  # 20 expired (one at exactly now), 21 not
        expired = {g for g in range(1, 42) if g % 2 == 0}
        assert store.retention.purge_expired(batch_size=3, max_batches=2) == 6
        assert IdempotencyKeys(store).purge(batch_size=3) == 20
        assert store.retention.purge_expired(batch_size=3) == 14
        with store.engine.connect() as conn:
            left = {int(g) for g, in conn.execute(text("SELECT event_id FROM pn_set_done"))}
            keys = {int(k[1:]) for k, in conn.execute(text('SELECT "key" FROM pn_idempotency'))}
        assert left == keys == set(range(1, 42)) - expired
    finally:
        store.close()


def test_a_purge_batch_takes_the_rows_that_expired_first(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        now = store.clock()
        _fill(store, now, 41)
        assert store.retention.purge_expired(batch_size=4, max_batches=1) == 4
        with store.engine.connect() as conn:
            gone = set(range(1, 42)) - {
                int(g) for g, in conn.execute(text("SELECT event_id FROM pn_set_done"))}
        assert gone == {34, 36, 38, 40}  # the earliest expiry: now - 39 for g = 40
    finally:
        store.close()


def _event_log_first_batch(store: Store) -> Callable[[], int]:
    """A log of ``ROWS`` events, the older half published and past the horizon,
    and a purge run stopped after its first batch."""
    now = time.time()
    with store.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO pn_events (event_id, topic, topic_seq, event_type, table_id, "
            "message_id, headers, body, created_at, published_at, attempts, rejections) "
            "SELECT g, 'hcat.d.t' || (g % 20), g, 'ADD_PARTITION', g % 20, 'm' || g, '{}', "
            "'x', :now - :n + g, :now, 0, 0 FROM generate_series(1, :n) AS g"),
            {"now": now, "n": ROWS})

    def first_batch() -> int:
        def stop() -> None:
            raise _Stop

        with contextlib.suppress(_Stop):
            store.housekeeping.purge_events(now - ROWS / 2, batch_size=BATCH,
                                            between_batches=stop)
        return BATCH

    return first_batch


def test_an_event_log_purge_batch_reads_about_a_batch(pg_store: Store) -> None:
    _assert_reads_a_batch(pg_store, "pn_events", _event_log_first_batch(pg_store))


def test_no_statement_of_an_event_log_purge_reads_the_retained_log(pg_store: Store) -> None:
    """Every statement a run sends that reads pn_events, not only the batch's DELETE:
    the purge runs every minute, and the retained log is most of the table."""
    sent = _sent(pg_store, "pn_events", _event_log_first_batch(pg_store))
    assert sent
    for sql, params, before in sent:
        for mode in ("force_custom_plan", "force_generic_plan"):
            read = rows_read(pg_store, sql, params, mode, "pn_events", before)
            assert read <= MOST, f"{mode}: read {read} rows of pn_events: {sql}"


def test_an_event_log_purge_keeps_every_event_its_rules_keep(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        t = store.clock()
        with store.engine.begin() as conn:
            for g in range(1, 32):
                conn.execute(text(
                    "INSERT INTO pn_events (event_id, topic, topic_seq, event_type, table_id, "
                    "message_id, headers, body, created_at, published_at, discarded_at, "
                    "attempts, rejections) VALUES (:g, :topic, :g, 'ADD_PARTITION', 1, :m, '{}', "
                    "'x', :created, :published, :discarded, 0, 0)"), {
                        "g": g, "m": f"m{g}",
                        "topic": "c" if g == 31 else "ab"[g % 2],  # 31: its topic's last
                        "created": t + g if 28 <= g <= 30 else t - 1000 + g,  # 28-30 young
                        "published": None if g in (3, 7, 9) else t,  # 3, 7 wait for the relay
                        "discarded": t if g == 9 else None})
        purged = store.housekeeping.purge_events(t, batch_size=4, held_from=15,
                                                 hold_until=t - 982)  # held past 15, bar 16-17
        with store.engine.connect() as conn:
            left = [int(g) for g, in conn.execute(text(
                "SELECT event_id FROM pn_events ORDER BY event_id"))]
        assert left == [3, 7, *range(18, 32)]
        assert purged == 15
        assert store.housekeeping.purged_below() == 18
    finally:
        store.close()


def test_the_purge_s_planner_setting_ends_with_its_batch(pg_store: Store) -> None:
    """``enable_sort = off`` is the batch's own (SET LOCAL): no later statement on any
    pooled connection is planned without sorts."""
    _fill(pg_store, pg_store.clock(), 9)
    with pg_store.engine.connect() as conn:  # a second pooled connection, idle in the pool
        assert conn.exec_driver_sql("SHOW enable_sort").scalar() == "on"
    assert pg_store.retention.purge_expired(batch_size=2, max_batches=1) == 2
    with contextlib.ExitStack() as stack:
        idle = pg_store.engine.pool.checkedin()  # type: ignore[attr-defined]
        conns = [stack.enter_context(pg_store.engine.connect()) for _ in range(idle)]
        assert conns, "the purge's connection went back to the pool"
        assert [c.exec_driver_sql("SHOW enable_sort").scalar() for c in conns] == \
            ["on"] * len(conns)
    with pg_store.engine.begin() as conn:  # a new transaction on the purge's connection
        assert conn.exec_driver_sql("SHOW enable_sort").scalar() == "on"
