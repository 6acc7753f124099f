"""``serve`` keeps nothing forever: what its jobs purge, what they keep, what they report.

The store's clock is injected (``build_app(clock=...)``): a hundred days pass
without waiting. Every job of ``serve``'s list runs once, as ``serve --once``
runs them; real SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
from partition_notify.store.cursors import Cursors
from partition_notify.store.idempotency import IdempotencyKeys
from partition_notify.writers.commit_manifest import purge_spark_commits
from sqlalchemy import text

from partition_notify.app import App, build_app
from partition_notify.deadlines.store import DeadlineStore
from partition_notify.serve.jobs import JOBS
from partition_notify.serve.service import Service
from tests.support.clock import FakeClock

DAY = 86400.0
T0 = 1_800_000_000.0


def run_serve_jobs(app: App) -> Service:
    """Every job of serve's list once, as ``serve --once`` runs them, but the deadline
    check: it would decide the seeded expectation's instances after the purge, adding
    verdicts and PARTITION_LATE events to what is counted (tests/deadlines has it)."""
    svc = Service(app, jobs=[j for j in JOBS if j.id != "deadlines"])
    svc.run_once()
    return svc


def counts(app: App) -> dict[str, int]:
    tables = ["pn_events", "pn_set_done", "pn_spark_commits", "pn_expectation_checks",
              "pn_consumer_cursors", "pn_idempotency"]
    with app.store.engine.connect() as conn:
        return {t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one())
                for t in tables}


def seed_old_rows(app: App, clock: FakeClock, spool: Path) -> None:
    """One of every growing kind, at day 0."""
    pub = app.publisher
    pub.register_table("db", "t", ["ds"], retention_seconds=int(DAY), location=str(spool.parent))
    pub.register_table("db", "quiet", ["ds"], retention_seconds=int(DAY))
    for i in range(20):
        pub.announce_partitions("db", "t", [f"ds={i}"])
        pub.send_mark_set_done("db", "t", f"ds={i}")
    pub.send_mark_set_done("db", "quiet", "ds=0")  # the topic's last event: kept
    table_id = app.store.catalog.get_table("db", "t").id
    with app.store.engine.begin() as conn:
        conn.execute(text("INSERT INTO pn_spark_commits (job_id, table_id, partitions, "
                          "processed_at) VALUES ('job-1', :t, 1, :now)"),
                     {"t": table_id, "now": clock()})
        conn.execute(text(
            "INSERT INTO pn_expectations (id, table_id, name, spec_template, cron, timezone, "
            "deadline, created_at) VALUES (1, :t, 'daily', 'ds={ds}', '0 0 * * *', 'UTC', "
            "'{\"deadline\": \"06:00\"}', :now)"), {"t": table_id, "now": clock()})
        conn.execute(text(
            "INSERT INTO pn_expectation_checks (expectation_id, logical_date, spec, "
            "deadline_at, outcome, checked_at) VALUES (1, '2027-01-01', 'ds=1', :now, 'ok', "
            ":now)"), {"now": clock()})
        conn.execute(text(
            "INSERT INTO pn_idempotency (principal, key, fingerprint, status, response, "
            "created_at, expires_at) VALUES ('p', 'k', 'f', 201, '{}', :now, :exp)"),
            {"now": clock(), "exp": clock() + DAY})
    Cursors(app.store).open("airflow:db.t:*")  # a watcher that went away
    spool.mkdir(parents=True)
    for name in ("job-2.json.rejected", ".job-3.json.tmp"):
        (spool / name).write_text("{}")
        os.utime(spool / name, (T0, T0))


def test_serve_purges_everything_that_grows(store_url: str, tmp_path: Path) -> None:
    clock = FakeClock(T0)
    app = build_app(store_url=store_url, transport_url="embedded://", clock=clock)
    spool = tmp_path / "t" / "_partition_notify"
    try:
        seed_old_rows(app, clock, spool)
        before = counts(app)
        assert before["pn_events"] == 41
        clock.advance(100 * DAY)
        app.publisher.send_mark_set_done("db", "t", "ds=new")
        svc = run_serve_jobs(app)
        after = counts(app)
        # Kept: the newest event of each topic (t's new one, quiet's only one).
        assert after == {"pn_events": 2, "pn_set_done": 1, "pn_spark_commits": 0,
                         "pn_expectation_checks": 0, "pn_consumer_cursors": 0,
                         "pn_idempotency": 0}, (before, after)
        assert sorted(p.name for p in spool.iterdir()) == []
        rows = svc.metrics.registry.get_sample_value("pn_store_rows", {"table": "pn_events"})
        assert rows == 2
        assert svc.metrics.registry.get_sample_value(
            "pn_housekeeping_purged_total", {"table": "events"}) == 40
    finally:
        app.close()


def test_event_log_purge_keeps_unpublished_cursor_held_and_recent(store_url: str) -> None:
    clock = FakeClock(T0)
    app = build_app(store_url=store_url, transport_url="embedded://", clock=clock)
    try:
        app.publisher.register_table("db", "t", ["ds"], retention_seconds=int(DAY))
        for i in range(10):  # events 1..10
            app.publisher.send_mark_set_done("db", "t", f"ds={i}")
        with app.store.engine.begin() as conn:  # 4 and 5 still wait for their relay
            conn.execute(text("UPDATE pn_events SET published_at = NULL "
                              "WHERE event_id IN (4, 5)"))
        Cursors(app.store).open("airflow:db.t:*", start=7)  # a live consumer at 7
        clock.advance(40 * DAY)
        Cursors(app.store).advance("airflow:db.t:*", 7)  # it moved recently
        app.publisher.send_mark_set_done("db", "t", "ds=recent")  # event 11, young
        run_serve_jobs(app)
        with app.store.engine.connect() as conn:
            left = [r[0] for r in conn.execute(text(
                "SELECT event_id FROM pn_events ORDER BY event_id"))]
        assert left == [4, 5, 8, 9, 10, 11]
        assert app.store.housekeeping.purged_below() == 8
    finally:
        app.close()


@pytest.mark.parametrize("stream", ["/v1/tables/db.t/stream", "/ui/tables/db.t/stream"])
def test_sse_resume_from_before_the_purge_is_410(store_url: str, stream: str) -> None:
    # The /ui board's stream too: before, it answered 200 and replayed what was left,
    # so the board silently missed the purged events.
    clock = FakeClock(T0)
    app = build_app(store_url=store_url, transport_url="embedded://", clock=clock,
                    http_bind="127.0.0.1:0", http_anonymous_read=True)
    from partition_notify.http.server import HttpServer
    from partition_notify.metrics import Metrics

    http = HttpServer(app, metrics=Metrics(), healthy=lambda: True)
    try:
        app.publisher.register_table("db", "t", ["ds"], retention_seconds=int(DAY))
        for i in range(5):  # events 1..5
            app.publisher.send_mark_set_done("db", "t", f"ds={i}")
        clock.advance(40 * DAY)
        app.publisher.send_mark_set_done("db", "t", "ds=5")  # event 6
        run_serve_jobs(app)
        port = http.start()
        url = f"http://127.0.0.1:{port}{stream}"
        for headers, params, field in (
            ({"Last-Event-ID": "2"}, {}, "header.Last-Event-ID"),
            ({}, {"last_event_id": "0"}, "query.last_event_id"),
        ):
            r = httpx.get(url, headers=headers, params=params, timeout=10)
            assert r.status_code == 410, r.text
            body = json.loads(r.text)
            assert body["field"] == field and "purged" in body["detail"], body
        # From the purge horizon on, the replay is whole: 200 and event 6.
        with httpx.stream("GET", url, headers={"Last-Event-ID": "5"}, timeout=10) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if line.startswith("id:"):
                    assert line == "id: 6"
                    break
    finally:
        http.stop()
        app.close()


def test_feature_purges_go_in_batches_and_keep_the_young(store_url: str) -> None:
    """Each feature purges its own table (the store imports none of them): oldest
    first, ``batch_size`` rows a transaction, the pause between batches; a verdict
    whose deadline the checker still looks at stays however old its check is."""
    clock = FakeClock(T0)
    app = build_app(store_url=store_url, transport_url="embedded://", clock=clock)
    try:
        app.publisher.register_table("db", "t", ["ds"])
        table_id = app.store.catalog.get_table("db", "t").id
        with app.store.engine.begin() as conn:
            for i in range(6):  # 5 processed 40 days ago, 1 now
                conn.execute(text("INSERT INTO pn_spark_commits (job_id, table_id, "
                                  "partitions, processed_at) VALUES (:j, :t, 1, :at)"),
                             {"j": f"job-{i}", "t": table_id,
                              "at": T0 - (40 * DAY if i < 5 else 0)})
            for i in range(6):  # 5 expired, 1 live
                conn.execute(text(
                    "INSERT INTO pn_idempotency (principal, key, fingerprint, status, response, "
                    "created_at, expires_at) VALUES ('p', :k, 'f', 201, '{}', :at, :exp)"),
                    {"k": f"k{i}", "at": T0 - DAY, "exp": T0 - 1 if i < 5 else T0 + DAY})
            conn.execute(text(
                "INSERT INTO pn_expectations (id, table_id, name, spec_template, cron, timezone, "
                "deadline, created_at) VALUES (1, :t, 'daily', 'ds={ds}', '0 0 * * *', 'UTC', "
                "'{\"deadline\": \"06:00\"}', :at)"), {"t": table_id, "at": T0 - 200 * DAY})
            for day, deadline in (("old", T0 - 100 * DAY), ("looked-at", T0 - DAY)):
                conn.execute(text(
                    "INSERT INTO pn_expectation_checks (expectation_id, logical_date, spec, "
                    "deadline_at, outcome, checked_at) VALUES (1, :d, 'ds=1', :dl, 'late', "
                    ":at)"), {"d": day, "dl": deadline, "at": T0 - 100 * DAY})
        pauses: list[int] = []

        def pause() -> None:
            pauses.append(1)

        assert purge_spark_commits(app.store, T0 - 30 * DAY, batch_size=2,
                                   between_batches=pause) == 5
        assert len(pauses) == 2  # batches of 2, 2, 1
        assert IdempotencyKeys(app.store).purge(batch_size=2) == 5
        assert DeadlineStore(app.store).purge_checks(
            T0 - 90 * DAY, T0 - 2 * DAY, batch_size=2) == 1
        with app.store.engine.connect() as conn:
            left = {t: [r[0] for r in conn.execute(text(f"SELECT {c} FROM {t}"))]
                    for t, c in (("pn_spark_commits", "job_id"), ("pn_idempotency", "key"),
                                 ("pn_expectation_checks", "logical_date"))}
        assert left == {"pn_spark_commits": ["job-5"], "pn_idempotency": ["k5"],
                        "pn_expectation_checks": ["looked-at"]}
    finally:
        app.close()
