"""An expectation waits for a derived set-done like for a writer's (issue 21).

Real stores, the real rule evaluator and deadline checker (the two ``serve``
jobs, rules first), a controlled clock for the deadline.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from partition_notify.app import App, build_app
from tests.deadlines.test_checker import Clock, utc


@pytest.fixture
def app(store_url: str) -> Iterator[App]:
    application = build_app(store_url=store_url, transport_url="embedded://")
    yield application
    application.close()


def setup(app: App) -> None:
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    app.rules.add("sales.orders", name="regions", kind="all-of",
                  params={"key": "region", "values": ["us", "eu"], "by": ["datestamp"]})
    app.deadlines.add("sales", "orders", name="daily", spec_template="datestamp={{ ds_nodash }}",
                      cron="0 0 * * *", timezone="UTC", deadline="06:00")


def regions(app: App, *names: str) -> None:
    for r in names:
        app.publisher.announce_partitions("sales", "orders", [{"datestamp": "20300101",
                                                               "region": r}])


def test_a_derived_set_done_before_the_deadline_is_on_time(app: App) -> None:
    setup(app)
    regions(app, "us", "eu")
    [done] = app.rules.evaluator().run_once().derived
    report = app.deadlines.checker(clock=Clock(utc(2030, 1, 2, 6, 0, 1))).check()
    assert (report.on_time, report.late) == (1, [])
    # wait / is-set-done answer with the derived set-done too.
    with app.subscriber() as sub:
        got = sub.wait_for_set_done("sales", "orders", "datestamp=20300101/region=us", timeout=0)
    assert got.event_id == done.event_id and got.derived_from is not None


def test_late_then_recovered_by_the_derived_set_done(app: App) -> None:
    setup(app)
    regions(app, "us")
    evaluator = app.rules.evaluator()
    assert evaluator.run_once().derived == []
    checker = app.deadlines.checker(clock=Clock(utc(2030, 1, 2, 6, 0, 1)), lookback_seconds=3600)
    assert [m.spec for m in checker.check().late] == ["datestamp=20300101"]
    regions(app, "eu")
    [done] = evaluator.run_once().derived
    [recovered] = checker.check().recovered
    assert recovered.set_done_event_id == done.event_id
