"""The deadline checker with a controllable clock, on SQLite and PostgreSQL.

On time (no late message), late (exactly one, however often checked),
late then done (one recovery), two checkers at once (one late message),
DST in the schedule's zone, and what subscribers and ``wait`` see.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from partition_notify.app import App, build_app
from partition_notify.contract import (
    AnyMessage,
    PartitionLateMessage,
    PartitionLateRecoveredMessage,
)
from partition_notify.core.errors import ConflictError, NotFoundError, ValidationError
from tests.support.accounts import ROOT


class Clock:
    def __init__(self, when: datetime) -> None:
        self.t = when.timestamp()

    def __call__(self) -> float:
        return self.t

    def at(self, when: datetime) -> Clock:
        self.t = when.timestamp()
        return self


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


@pytest.fixture
def app(store_url: str) -> Iterator[App]:
    application = build_app(store_url=store_url, transport_url="embedded://")
    yield application
    application.close()


def daily(app: App, tz: str = "UTC", deadline: str = "06:00") -> str:
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    app.deadlines.add("sales", "orders", name="daily", spec_template="datestamp={{ ds_nodash }}",
                      cron="0 0 * * *", timezone=tz, deadline=deadline)
    return "sales.orders"


def logged(app: App, event_type: str) -> list[str]:
    with app.store.engine.connect() as conn:
        rows = conn.execute(text("SELECT body FROM pn_events WHERE event_type = :t "
                                 "ORDER BY event_id"), {"t": event_type})
        return [r[0] for r in rows]


def test_on_time_publishes_nothing(app: App) -> None:
    daily(app)
    app.publisher.send_mark_set_done("sales", "orders", "datestamp=20300101")
    report = app.deadlines.checker(clock=Clock(utc(2030, 1, 2, 6, 0, 1))).check()
    assert (report.on_time, report.late) == (1, [])
    assert logged(app, "PARTITION_LATE") == []
    assert app.deadlines.status("sales", "orders", "daily")[0]["outcome"] == "on_time"


def test_late_exactly_once_then_recovered_once(app: App) -> None:
    daily(app)
    clock = Clock(utc(2030, 1, 2, 5, 59, 59))
    # Only deadlines of the last hour: the one of 1 January is not this test's.
    checker = app.deadlines.checker(clock=clock, lookback_seconds=3600)
    seen: queue.Queue[AnyMessage] = queue.Queue()
    with app.subscriber() as sub:
        sub.subscribe("sales.orders", seen.put, history=False)
        assert checker.check().late == []  # a second before the deadline
        clock.at(utc(2030, 1, 2, 6, 0, 1))
        report = checker.check()
        assert [m.spec for m in report.late] == ["datestamp=20300101"]
        msg = report.late[0]
        assert msg.logical_date == "2030-01-01T00:00:00+00:00"
        assert msg.deadline == int(utc(2030, 1, 2, 6).timestamp())
        assert msg.topic == "hcat.sales.orders" and msg.expectation == "daily"
        for _ in range(3):
            assert checker.check().late == []
        assert len(logged(app, "PARTITION_LATE")) == 1
        # The set-done arrives late: exactly one recovery.
        done = app.publisher.send_mark_set_done("sales", "orders", "datestamp=20300101")
        rec = checker.check().recovered
        assert len(rec) == 1 and rec[0].set_done_event_id == done.event_id
        assert checker.check().recovered == []
        assert len(logged(app, "PARTITION_LATE_RECOVERED")) == 1
        # The subscriber saw both, on the table's topic.
        got = [seen.get(timeout=10) for _ in range(3)]
    kinds = [type(m) for m in got]
    assert kinds.count(PartitionLateMessage) == 1
    assert kinds.count(PartitionLateRecoveredMessage) == 1
    assert app.deadlines.open_late("sales", "orders") == []


def test_done_twice_the_checker_still_judges_the_first_completion(app: App) -> None:
    """Waiters get the newest covering set-done; the checker keeps the first one."""
    daily(app)
    checker = app.deadlines.checker(clock=Clock(utc(2030, 1, 2, 6, 0, 1)), lookback_seconds=3600)
    assert [m.spec for m in checker.check().late] == ["datestamp=20300101"]
    first = app.publisher.send_mark_set_done("sales", "orders", "datestamp=20300101",
                                             revision=1)
    app.publisher.send_mark_set_done("sales", "orders", "datestamp=20300101/region=us",
                                     revision=2)
    rec = checker.check().recovered
    assert len(rec) == 1 and rec[0].set_done_event_id == first.event_id


def test_coarser_set_done_counts_and_finer_does_not(app: App) -> None:
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    app.deadlines.add("sales", "orders", name="us", cron="0 0 * * *", deadline="+6h",
                      spec_template="datestamp={{ ds_nodash }}/region=us")
    app.deadlines.add("sales", "orders", name="all", cron="0 0 * * *", deadline="+6h",
                      spec_template="datestamp={{ ds_nodash }}")
    app.publisher.send_mark_set_done("sales", "orders", "datestamp=20300101/region=eu")
    app.publisher.send_mark_set_done("sales", "orders", "datestamp=20300101/region=us")
    report = app.deadlines.checker(clock=Clock(utc(2030, 1, 2, 6, 0, 1))).check()
    assert report.on_time == 1 and [m.expectation for m in report.late] == ["all"]


def test_two_checkers_at_once_publish_one_late_message(store_url: str) -> None:
    apps = [build_app(store_url=store_url, transport_url="embedded://") for _ in range(4)]
    try:
        daily(apps[0])
        go = threading.Barrier(len(apps))
        reports = []

        def run(a: App) -> None:
            checker = a.deadlines.checker(clock=Clock(utc(2030, 1, 2, 7)))
            go.wait(10)
            reports.append(checker.check())

        threads = [threading.Thread(target=run, args=(a,)) for a in apps]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sum(len(r.late) for r in reports) == 1
        assert len(logged(apps[0], "PARTITION_LATE")) == 1
    finally:
        for a in apps:
            a.close()


@pytest.mark.parametrize(("before", "after", "spec"), [
    # Spring forward: the deadline 06:00 local is 04:00 UTC from 29 March 2026.
    (utc(2026, 3, 29, 3, 59, 59), utc(2026, 3, 29, 4, 0, 1), "datestamp=20260328"),
    # The day after the change (APScheduler's CronTrigger skipped this instance).
    (utc(2026, 3, 30, 3, 59, 59), utc(2026, 3, 30, 4, 0, 1), "datestamp=20260329"),
    # Fall back: 06:00 local is 05:00 UTC again on 25 October 2026.
    (utc(2026, 10, 25, 4, 59, 59), utc(2026, 10, 25, 5, 0, 1), "datestamp=20261024"),
])
def test_dst_change_in_the_schedule_zone(
    app: App, before: datetime, after: datetime, spec: str
) -> None:
    daily(app, tz="Europe/Berlin")
    # These deadlines lie before today: only an expectation created before them judges them.
    with app.store.engine.begin() as conn:
        conn.execute(text("UPDATE pn_expectations SET created_at = 0"))
    checker = app.deadlines.checker(clock=Clock(before), lookback_seconds=3600)
    first = checker.check()
    assert spec not in [m.spec for m in first.late]
    checker.clock = Clock(after)
    assert spec in [m.spec for m in checker.check().late]


@pytest.mark.parametrize(("kwargs", "error", "fragment"), [
    ({"name": "Bad Name"}, ValidationError, "expectation name 'Bad Name'"),
    ({"spec_template": "day={{ ds }}"}, ValidationError, "unknown key(s) ['day']"),
    ({"spec_template": "datestamp={{ today }}"}, ValidationError, "unknown variable(s)"),
    ({"cron": "daily"}, ValidationError, "5-field crontab"),
    ({"timezone": "Europe/Nowhere"}, ValidationError, "not an IANA zone"),
    ({"deadline": "6am"}, ValidationError, "expected a local time HH:MM"),
    ({"name": "daily"}, ConflictError, "has an expectation named 'daily' already"),
    # SQLite stored it, PostgreSQL's text refused it (HTTP 503 "store unavailable").
    ({"spec_template": "datestamp={{ ds_nodash }}\x00"}, ValidationError, "NUL character"),
])
def test_bad_expectation_stores_nothing(
    app: App, kwargs: dict[str, str], error: type[Exception], fragment: str
) -> None:
    daily(app)
    args = {"name": "other", "spec_template": "datestamp={{ ds_nodash }}", "cron": "0 0 * * *",
            "timezone": "UTC", "deadline": "06:00", **kwargs}
    with pytest.raises(error) as exc:
        app.deadlines.add("sales", "orders", **args)
    assert fragment in str(exc.value)
    assert [v.name for v in app.deadlines.expectations()] == ["daily"]
    with pytest.raises(NotFoundError):
        app.deadlines.remove("sales", "orders", "nope")


def cli(store_url: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "partition_notify.cli", "--store-url", store_url, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def test_cli_expect_and_wait_fail_on_late(app: App, store_url: str) -> None:
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    add = cli(store_url, "expect", "add", "sales.orders", "--name", "daily", "--cron", "0 0 * * *",
              "--spec-template", "datestamp={{ ds_nodash }}", "--deadline", "06:00",
              "--timezone", "Europe/Berlin")
    assert add.returncode == 0, add.stderr
    assert '"nextSpec": "datestamp=' in add.stdout
    bad = cli(store_url, "expect", "add", "sales.orders", "--name", "x", "--cron", "0 0 * *",
              "--spec-template", "datestamp={{ ds_nodash }}", "--deadline", "06:00")
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "5-field crontab" in bad.stderr
    assert '"name": "daily"' in cli(store_url, "expect", "list").stdout
    # Not late yet: wait --fail-on-late times out with exit 3.
    t = cli(store_url, "wait", "sales.orders", "datestamp=20300101/region=us", "--timeout", "0.5",
            "--fail-on-late")
    assert t.returncode == 3, t.stderr
    app.deadlines.checker(clock=Clock(utc(2030, 1, 2, 5, 0, 1))).check()
    late = cli(store_url, "wait", "sales.orders", "datestamp=20300101/region=us", "--timeout",
               "30", "--fail-on-late")
    assert late.returncode == 4, late.stderr
    assert "datestamp=20300101 is late" in late.stderr
    status = cli(store_url, "expect", "status", "sales.orders", "daily")
    assert '"outcome": "late"' in status.stdout
    app.publisher.send_mark_set_done("sales", "orders", "datestamp=20300101")
    ok = cli(store_url, "wait", "sales.orders", "datestamp=20300101/region=us", "--timeout", "30",
             "--fail-on-late")
    assert ok.returncode == 0 and "PARTITION_DONE" in ok.stdout
    gone = cli(store_url, "expect", "remove", "sales.orders", "daily")
    assert gone.returncode == 0 and cli(store_url, "expect", "list").stdout == ""
