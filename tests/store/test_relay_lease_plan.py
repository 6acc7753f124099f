"""The relay's lease reads the log's unpublished head, not the whole log.

Every lease first asks which events are being retried (``retry_at IS NOT
NULL``: a few refused events, on a small partial index), then takes the oldest
unpublished ones. Without statistics (a new store, autovacuum off) PostgreSQL
takes ``retry_at IS NOT NULL`` for 99.5% of the table and scans all of it, on
every lease. The statements a lease really sends are captured and explained
by the database, with no ANALYZE run, under both of PostgreSQL's plan modes.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from partition_notify.store import Store, repositories
from partition_notify.store.uow import UnitOfWork
from sqlalchemy import event, text

from tests.support.query_plans import rows_read

#: Published events in the log once it has grown; the unpublished head after them.
PUBLISHED = 100_000
PENDING = 30
LIMIT = 100


def _grow(store: Store, now: float) -> None:
    with store.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO pn_events (event_id, topic, topic_seq, event_type, table_id, message_id, "
            "headers, body, created_at, published_at, attempts, rejections) "
            "SELECT g, 'hcat.d.t' || (g % 20), g, 'ADD_PARTITION', g % 20, 'm' || g, '{}', 'x', "
            ":now - 1000, CASE WHEN g > :published THEN NULL ELSE :now END, 0, 0 "
            "FROM generate_series(1, :n) AS g"),
            {"now": now, "published": PUBLISHED, "n": PUBLISHED + PENDING})


def test_a_lease_reads_only_the_unpublished_head(pg_store: Store) -> None:
    for _ in range(8):  # while the log is empty: psycopg prepares from the fifth
        assert pg_store.log.lease_unpublished("relay-1", LIMIT, 30.0) == []
    now = time.time()
    _grow(pg_store, now)
    sent: list[tuple[str, Any]] = []

    def grab(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if "pn_events" in statement and statement.lstrip().upper().startswith("SELECT"):
            sent.append((statement, params))

    event.listen(pg_store.engine, "before_cursor_execute", grab)
    try:
        leased = pg_store.log.lease_unpublished("relay-1", LIMIT, 30.0)
    finally:
        event.remove(pg_store.engine, "before_cursor_execute", grab)
    assert [e.event_id for e in leased] == list(range(PUBLISHED + 1, PUBLISHED + PENDING + 1))
    assert sent
    for sql, params in sent:
        for mode in ("force_custom_plan", "force_generic_plan"):
            read = rows_read(pg_store, sql, params, mode, "pn_events")
            assert read <= 2 * LIMIT, f"{mode}: read {read} rows of pn_events: {sql}"


def test_every_retrying_event_is_read_past_one_page(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(repositories, "RETRYING_PAGE", 3)
    store = Store.open(store_url)
    try:
        with store.engine.begin() as conn:
            conn.execute(text(
                "INSERT INTO pn_events (event_id, topic, topic_seq, event_type, table_id, "
                "message_id, headers, body, created_at, attempts, rejections, retry_at) "
                "VALUES (:n, 't' || :n, 1, 'ADD_PARTITION', 1, 'm' || :n, '{}', 'x', 0, 1, 1, :n)"),
                [{"n": n} for n in range(1, 8)])
        for page in (3, 7, 8):
            monkeypatch.setattr(repositories, "RETRYING_PAGE", page)
            with UnitOfWork(store.engine, write=False) as uow:
                assert sorted(e for e, _t, _r in uow.events.retrying()) == list(range(1, 8))
    finally:
        store.close()
