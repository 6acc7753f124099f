"""Push dead letters (store/push_letters.py) and their CLI, on SQLite and
PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from partition_notify.store import Store
from partition_notify.store.push_letters import (
    DISCARDED_RETENTION_SECONDS,
    PushLetters,
)
from sqlalchemy import event, text

from partition_notify.app import App, build_app
from partition_notify.core.errors import ConflictError, NotFoundError
from tests.store.test_dead_letters import Clock, _cli

SINK = "airflow-push:http://airflow:8080"


@pytest.fixture
def app(store_url: str) -> Iterator[tuple[App, Store, Clock]]:
    app = build_app(store_url=store_url, transport_url="embedded://")
    clock = Clock()
    yield app, Store(app.store.engine, clock=clock), clock
    app.close()


def test_record_redrive_discard_and_purge(app: tuple[App, Store, Clock]) -> None:
    _, store, clock = app
    letters = PushLetters(store)
    letters.record(SINK, 7, "sales.orders", "HTTP 404: asset gone")
    letters.record(SINK, 9, "sales.returns", "HTTP 422: invalid")
    assert [(d.event_id, d.table, d.redriven) for d in letters.find()] == [
        (7, "sales.orders", False), (9, "sales.returns", False)]
    assert [d.event_id for d in letters.find(table="sales.returns")] == [9]
    assert letters.due(SINK, 10) == []
    assert [d.event_id for d in letters.redrive([7])] == [7]
    assert [d.event_id for d in letters.due(SINK, 10)] == [7]
    letters.sending(SINK, 7)
    assert letters.due(SINK, 10)[0].sending_since == clock.now
    letters.record(SINK, 7, "sales.orders", "HTTP 404 again")  # refused again: dead again
    assert letters.due(SINK, 10) == []
    letters.discard([9])
    with pytest.raises(ConflictError, match="discarded"):
        letters.redrive([9])
    assert [d.event_id for d in letters.redrive(None)] == [7]  # --all skips discarded ones
    with pytest.raises(NotFoundError, match="123"):
        letters.discard([123])
    letters.delivered(SINK, 7)
    clock.now += DISCARDED_RETENTION_SECONDS + 1
    assert letters.purge(batch_size=10) == 1
    assert letters.find() == []


def test_cli_lists_both_sources_and_acts_on_one(store_url: str,
                                                app: tuple[App, Store, Clock]) -> None:
    pn, store, _ = app
    pn.publisher.register_table("sales", "other", ["datestamp"])
    PushLetters(store).record(SINK, 5, "sales.orders", "HTTP 403: forbidden")
    out = _cli(store_url, "list")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["source"], r["event_id"], r["table"], r["sink"]) for r in rows] == [
        ("airflow-push", 5, "sales.orders", SINK)]
    assert _cli(store_url, "list", "--source", "relay").stdout == ""
    out = _cli(store_url, "list", "--source", "airflow-push", "--table", "sales.other")
    assert out.returncode == 0 and out.stdout == ""  # registered, no dead letters
    out = _cli(store_url, "list", "--source", "airflow-push", "--table", "sales.nosuch")
    assert out.returncode == 1 and "sales.nosuch is not registered" in out.stderr
    out = _cli(store_url, "redrive", "5")  # the relay has no such dead letter
    assert out.returncode == 1 and "not dead letters" in out.stderr
    out = _cli(store_url, "redrive", "--source", "airflow-push", "5")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["action"] == "redriven"
    out = _cli(store_url, "discard", "--source", "airflow-push", "5")
    assert out.returncode == 0 and json.loads(out.stdout)["discarded"] is True


def test_unknown_ids_are_named_as_the_relay_names_them(app: tuple[App, Store, Clock]) -> None:
    # The CLI printed "event(s) [41] are not push dead letters", a Python list.
    with pytest.raises(NotFoundError, match=r"^event\(s\) 41, 57 are not push dead letters$"):
        PushLetters(app[1]).redrive([57, 41])


def _log_events(store: Store, ids: range, created_at: float) -> None:
    with store.engine.begin() as conn:
        for i in ids:
            conn.execute(text(
                "INSERT INTO pn_events (event_id, topic, topic_seq, event_type, table_id, "
                "message_id, headers, body, created_at, published_at, attempts, rejections) "
                "VALUES (:i, 'hcat.sales.orders', :i, 'PARTITION_DONE', 1, :m, '{}', 'x', "
                ":t, :t, 0, 0)"), {"i": i, "m": f"m{i}", "t": created_at})


def test_the_log_keeps_the_event_of_a_letter_nobody_discarded(
        app: tuple[App, Store, Clock]) -> None:
    # As the relay's dead letters hold their event: a redrive reads the event from
    # the log, so purging it would lose the set-done Airflow refused.
    _, store, clock = app
    letters = PushLetters(store)
    _log_events(store, range(1, 6), clock.now - 100)
    letters.record(SINK, 2, "sales.orders", "HTTP 404: asset gone")
    letters.record(SINK, 3, "sales.orders", "HTTP 404: asset gone")
    letters.discard([3])
    assert store.housekeeping.purge_events(clock.now, batch_size=10) == 3  # 1, 3, 4
    assert _events(store) == [2, 5]  # 5: the topic's last
    clock.now += DISCARDED_RETENTION_SECONDS + 1
    letters.discard([2])
    assert letters.purge(batch_size=10) == 1  # 3's: discarded long ago
    clock.now += DISCARDED_RETENTION_SECONDS + 1
    assert letters.purge(batch_size=10) == 1 and letters.find() == []
    assert store.housekeeping.purge_events(clock.now, batch_size=10) == 1
    assert _events(store) == [5]


def test_letters_of_events_the_log_purged_are_purged(app: tuple[App, Store, Clock]) -> None:
    # Letters kept by a version that let the log purge their events: a redrive could
    # only drop them (the sink finds no event), and nothing else removed them.
    _, store, clock = app
    letters = PushLetters(store)
    _log_events(store, range(1, 5), clock.now - 100)
    assert store.housekeeping.purge_events(clock.now, batch_size=10) == 3  # 4: the topic's last
    for event_id in (1, 2, 4, 999):
        letters.record(SINK, event_id, "sales.orders", "HTTP 404: asset gone")
    assert letters.purge(batch_size=1) == 2
    assert [d.event_id for d in letters.find()] == [4, 999]  # 999: above the purge horizon


def _events(store: Store) -> list[int]:
    with store.engine.connect() as conn:
        return [int(i) for i, in conn.execute(text(
            "SELECT event_id FROM pn_events ORDER BY event_id"))]


def test_the_purge_deletes_in_batches_and_stops_between_them(
        app: tuple[App, Store, Clock]) -> None:
    _, store, clock = app
    letters = PushLetters(store)
    for event_id in range(1, 8):
        letters.record(SINK, event_id, "sales.orders", "HTTP 422")
    letters.discard(list(range(1, 8)))
    clock.now += DISCARDED_RETENTION_SECONDS + 1
    asked: list[int] = []

    def go_on() -> bool:  # serve's stop between batches: stop after the second
        asked.append(1)
        return len(asked) < 2

    assert letters.purge(batch_size=3, between_batches=go_on) == 6
    assert len(letters.find()) == 1 and len(asked) == 2
    assert letters.purge(batch_size=3) == 1 and letters.find() == []


def test_the_log_purge_looks_letters_up_by_event(sqlite_url: str) -> None:
    # The log's purge asks, for each event it considers, whether a letter holds it:
    # without the event index (migration 0018) SQLite scanned every letter each time.
    # (The letters' own purge may scan the letters: one pass per run, not per event.)
    store = Store.open(sqlite_url)
    try:
        # Two published events of one topic, the first past the horizon: the purge
        # reads the log only when its oldest event is (store/housekeeping.py).
        with store.engine.begin() as conn:
            for event_id in (1, 2):
                conn.execute(text(
                    "INSERT INTO pn_events (event_id, topic, topic_seq, event_type, table_id, "
                    "message_id, headers, body, created_at, published_at, attempts, "
                    "rejections) VALUES (:e, 't', :e, 'SET_DONE', 1, :m, '{}', 'x', 1, 1, 0, 0)"),
                    {"e": event_id, "m": f"m{event_id}"})
        sent: list[tuple[str, Any]] = []

        @event.listens_for(store.engine, "before_cursor_execute")
        def keep(conn: Any, cursor: Any, sql: str, params: Any, ctx: Any, many: bool) -> None:
            if "pn_push_dead_letters" in sql and not many:
                sent.append((sql, params))

        store.housekeeping.purge_events(store.clock(), batch_size=10)
        assert sent
        with store.engine.connect() as conn:
            plans = [" / ".join(str(r[-1]) for r in conn.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {sql}", params)) for sql, params in sent
                if sql.lstrip().upper().startswith(("SELECT", "DELETE"))]
        assert plans and not [p for p in plans if "SCAN pn_push_dead_letters" in p], plans
    finally:
        store.close()
