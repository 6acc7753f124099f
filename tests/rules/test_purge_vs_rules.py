"""The event-log purge and rule cursors: an input a rule has not read yet is not purged.

Defect (issue 21): ``store.housekeeping.purge_events`` kept the events every
consumer cursor still needs, but not those a rule's cursor (``pn_rules``) had
not passed. A rule whose evaluation lagged (``serve``'s rules job stopped, a
rule failing for a while) lost its inputs: the spec never completed. Real
SQLite and PostgreSQL, the injected clock: forty days pass without waiting.
"""

from __future__ import annotations

import pytest

from partition_notify.app import App
from partition_notify.serve.housekeeping import purge_all
from tests.support.clock import FakeClock, app_on_clock

DAY = 86400.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_800_000_000.0)


app = pytest.fixture(name="app")(app_on_clock)


def _regions_rule(app: App) -> None:
    app.publisher.register_table("sales", "orders", ["datestamp", "region"],
                                 retention_seconds=int(DAY))
    app.rules.add("sales.orders", name="regions", kind="all-of",
                  params={"key": "region", "values": ["us", "eu", "apac"], "by": ["datestamp"]})


def _announce(app: App, region: str) -> None:
    app.publisher.announce_partitions("sales", "orders", [{"datestamp": "20260101",
                                                           "region": region}])


def test_purge_keeps_inputs_a_lagging_rule_has_not_read(app: App, clock: FakeClock) -> None:
    _regions_rule(app)
    _announce(app, "us")
    _announce(app, "eu")
    clock.advance(40 * DAY)  # past the event log's 30 days; the rules job did not run
    _announce(app, "apac")
    purge_all(app, 100, None)
    [msg] = app.rules.evaluator().run_once().derived
    assert msg.spec == "datestamp=20260101"
    assert msg.derived_from is not None
    assert sorted(i.value for i in msg.derived_from.inputs) == ["apac", "eu", "us"]


def test_a_rule_stuck_past_the_cursor_retention_holds_the_log_no_longer(
        app: App, clock: FakeClock) -> None:
    """Bounded: a rule that never moves (input table gone, evaluation failing) holds the
    log for ``cursor_retention_seconds`` (90 days), as an idle consumer cursor does."""
    _regions_rule(app)
    _announce(app, "us")
    _announce(app, "eu")
    clock.advance(100 * DAY)
    _announce(app, "apac")
    assert purge_all(app, 100, None).events == 2
    report = app.rules.evaluator().run_once()
    assert report.derived == [] and report.purged_unread >= 1


def test_evaluated_inputs_are_purged_as_before(app: App, clock: FakeClock) -> None:
    _regions_rule(app)
    _announce(app, "us")
    _announce(app, "eu")
    assert app.rules.evaluator().run_once().derived == []  # both counted, cursor moved
    clock.advance(40 * DAY)
    _announce(app, "apac")
    assert purge_all(app, 100, None).events == 2
    [msg] = app.rules.evaluator().run_once().derived
    assert msg.spec == "datestamp=20260101"
