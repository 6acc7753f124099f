"""Deadline coverage comes from the event log; a new expectation judges only its future.

Issue 24: the checker asked the retention table whether a set-done covered
the spec, so a table whose retention was shorter than the gap between its
set-done and the deadline got a false PARTITION_LATE (and ``wait
--fail-on-late`` exited 4 for complete data). And an expectation added today
published PARTITION_LATE at once for deadlines before it existed. One store
clock, moved by hand; SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from partition_notify.store import Store

from partition_notify.app import App, build_app
from tests.support.clock import FakeClock


def ts(*a: int) -> float:
    return datetime(*a, tzinfo=UTC).timestamp()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(ts(2030, 1, 1, 0, 0))


@pytest.fixture
def app(store_url: str, clock: FakeClock) -> Iterator[App]:
    application = build_app(store_url=store_url, transport_url="embedded://")
    # The same wiring on a store whose clock the test moves (retention expiry included).
    application.store.close()
    store = Store.open(store_url, clock=clock)
    from partition_notify.publisher import Publisher

    from partition_notify.app import App as AppClass
    from partition_notify.app import build_transport

    transport = build_transport(application.settings, store)
    wired = AppClass(application.settings, store, transport,
                     Publisher(store, transport, application.publisher.config))
    yield wired
    wired.close()


def _expect_daily(app: App, **table: object) -> None:
    app.publisher.register_table("sales", "orders", ["datestamp"], **table)  # type: ignore[arg-type]
    app.deadlines.add("sales", "orders", name="daily", spec_template="datestamp={{ ds_nodash }}",
                      cron="0 0 * * *", timezone="UTC", deadline="06:00")


def test_set_done_expired_from_retention_before_the_deadline_is_on_time(
    app: App, clock: FakeClock
) -> None:
    _expect_daily(app, retention_seconds=3600)
    clock.now = ts(2030, 1, 2, 1, 0)  # done at 01:00, retention one hour, deadline 06:00
    app.publisher.send_mark_set_done("sales", "orders", "datestamp=20300101")
    clock.now = ts(2030, 1, 2, 6, 0, 1)
    report = app.deadlines.checker().check()
    assert (report.on_time, [m.spec for m in report.late]) == (1, [])
    assert app.deadlines.status("sales", "orders", "daily")[0]["outcome"] == "on_time"


def test_a_new_expectation_judges_only_deadlines_after_it_was_created(
    app: App, clock: FakeClock
) -> None:
    clock.now = ts(2030, 1, 10, 12, 0)  # days of hourly and daily deadlines lie behind
    app.publisher.register_table("sales", "orders", ["datestamp"])
    app.deadlines.add("sales", "orders", name="daily", spec_template="datestamp={{ ds_nodash }}",
                      cron="0 0 * * *", timezone="UTC", deadline="06:00")
    app.deadlines.add("sales", "orders", name="hourly",
                      spec_template="datestamp={{ ds_nodash }}", cron="0 * * * *",
                      timezone="UTC", deadline="+30m")
    report = app.deadlines.checker().check()
    assert report.late == [], [(m.expectation, m.logical_date) for m in report.late]
    # The first hourly deadlines after creation: 12:30 (hour 11) and 13:30 (hour 12).
    clock.now = ts(2030, 1, 10, 13, 31)
    report = app.deadlines.checker().check()
    assert [(m.expectation, m.logical_date) for m in report.late] == [
        ("hourly", "2030-01-10T11:00:00+00:00"), ("hourly", "2030-01-10T12:00:00+00:00")]
