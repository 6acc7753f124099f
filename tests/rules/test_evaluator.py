"""The rule evaluator on SQLite and PostgreSQL: each kind, DST days, order, late inputs.

Real stores (the ``store_url`` fixture), the embedded transport, the real
evaluator ``serve`` runs (``app.rules.evaluator().run_once()``); what a rule
derived is read back from the event log, as a consumer would see it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, timedelta

import pytest

from partition_notify.app import App, build_app
from partition_notify.contract import SetDoneMessage, decode
from partition_notify.contract.messages import PN_DERIVED_RULE, to_envelope
from partition_notify.rules.kinds import utc_hours


@pytest.fixture
def app(store_url: str) -> Iterator[App]:
    application = build_app(store_url=store_url, transport_url="embedded://")
    yield application
    application.close()


def derived(app: App) -> list[SetDoneMessage]:
    """Every derived set-done in the log, oldest first."""
    out = []
    for ev in app.store.log.events_after(0, 100_000):
        msg = decode(ev.body)
        if isinstance(msg, SetDoneMessage) and msg.derived_from is not None:
            out.append(msg)
    return out


def run(app: App) -> list[SetDoneMessage]:
    return app.rules.evaluator().run_once().derived


def regions(app: App) -> None:
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    app.rules.add("sales.orders", name="regions", kind="all-of",
                  params={"key": "region", "values": ["us", "eu", "apac"], "by": ["datestamp"]})


def test_all_of_fires_once_when_every_value_is_there(app: App) -> None:
    regions(app)
    app.publisher.announce_partitions("sales", "orders", [{"datestamp": "20260101",
                                                           "region": "us"}])
    assert run(app) == []
    # A finer set-done counts like a partition; out of order does not matter.
    app.publisher.send_mark_set_done("sales", "orders", "datestamp=20260101/region=apac")
    app.publisher.announce_partitions("sales", "orders", [{"datestamp": "20260102",
                                                           "region": "eu"}])
    assert run(app) == []
    app.publisher.announce_partitions("sales", "orders", [{"datestamp": "20260101",
                                                           "region": "eu"}])
    [msg] = run(app)
    assert msg.spec == "datestamp=20260101" and (msg.db, msg.table) == ("sales", "orders")
    assert msg.derived_from is not None
    assert msg.derived_from.rule == "regions" and msg.derived_from.kind == "all-of"
    assert sorted(i.value for i in msg.derived_from.inputs) == ["apac", "eu", "us"]
    assert to_envelope(msg).headers[PN_DERIVED_RULE] == "regions"
    # The derived set-done is an ordinary one for waiters and the retention look-up.
    info = app.publisher.table("sales", "orders")
    assert app.store.retention.set_done_covering(info, ["datestamp=20260101"])
    assert run(app) == [] and len(derived(app)) == 1


def test_a_partition_after_the_rule_fired_brings_no_second_set_done(app: App) -> None:
    regions(app)
    for r in ("us", "eu", "apac"):
        app.publisher.announce_partitions("sales", "orders", [{"datestamp": "20260101",
                                                               "region": r}])
    assert len(run(app)) == 1
    # A late re-announcement (overwrite, new revision) and a finer set-done: counted as late.
    app.publisher.announce_partitions("sales", "orders", [{"datestamp": "20260101",
                                                           "region": "us"}],
                                      revision=2, replace=True)
    app.publisher.send_mark_set_done("sales", "orders", "datestamp=20260101/region=eu")
    report = app.rules.evaluator().run_once()
    assert report.derived == [] and report.late_inputs == 2
    assert len(derived(app)) == 1


def test_a_writer_set_done_first_means_no_derived_one(app: App) -> None:
    regions(app)
    app.publisher.send_mark_set_done("sales", "orders", "datestamp=20260101")
    for r in ("us", "eu", "apac"):
        app.publisher.announce_partitions("sales", "orders", [{"datestamp": "20260101",
                                                               "region": r}])
    report = app.rules.evaluator().run_once()
    assert report.derived == [] and report.already_done == 1
    assert derived(app) == []


def test_a_rule_added_late_reads_the_retained_history(app: App) -> None:
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    for r in ("us", "eu", "apac"):
        app.publisher.announce_partitions("sales", "orders", [{"datestamp": "20260101",
                                                               "region": r}])
    app.rules.add("sales.orders", name="regions", kind="all-of",
                  params={"key": "region", "values": ["us", "eu", "apac"], "by": ["datestamp"]})
    app.rules.add("sales.orders", name="from-now", kind="all-of", from_now=True,
                  params={"key": "region", "values": ["us", "eu", "apac"], "by": ["datestamp"]})
    [msg] = run(app)
    assert msg.derived_from is not None and msg.derived_from.rule == "regions"


def test_cross_table(app: App) -> None:
    for t in ("orders", "returns"):
        app.publisher.register_table("sales", t, ["datestamp", "region"])
    app.publisher.register_table("reports", "daily", ["datestamp"])
    app.rules.add("reports.daily", name="inputs", kind="cross-table",
                  params={"inputs": ["sales.orders", "sales.returns"], "by": ["datestamp"]})
    app.publisher.send_mark_set_done("sales", "orders", "datestamp=20260101")
    # A finer set-done of the other input does not make its datestamp done.
    app.publisher.send_mark_set_done("sales", "returns", "datestamp=20260101/region=us")
    assert run(app) == []
    app.publisher.send_mark_set_done("sales", "returns", "datestamp=20260101")
    [msg] = run(app)
    assert (msg.db, msg.table, msg.spec) == ("reports", "daily", "datestamp=20260101")
    assert msg.derived_from is not None
    assert {i.table for i in msg.derived_from.inputs} == {"sales.orders", "sales.returns"}


def hourly(app: App, tz: str) -> None:
    app.publisher.register_table("web", "hits", ["datestamp", "hour"])
    app.rules.add("web.hits", name="daily", kind="calendar", params={
        "key": "hour", "keyFormat": "YYYYMMDDHH", "into": "datestamp", "intoFormat": "YYYYMMDD",
        "timezone": tz})


def announce_hours(app: App, hours: list[datetime], local_day: str) -> None:
    for h in hours:
        app.publisher.announce_partitions("web", "hits", [{"datestamp": local_day,
                                                           "hour": h.strftime("%Y%m%d%H")}])


@pytest.mark.parametrize(("tz", "day", "hours"), [
    ("Europe/Berlin", date(2026, 3, 29), 23), ("Europe/Berlin", date(2026, 10, 25), 25),
    ("America/New_York", date(2026, 3, 8), 23), ("America/New_York", date(2026, 11, 1), 25),
    ("Europe/Berlin", date(2026, 6, 1), 24),
])
def test_calendar_day_of_a_dst_change(app: App, tz: str, day: date, hours: int) -> None:
    hourly(app, tz)
    utc = utc_hours(day, tz)
    assert len(utc) == hours
    local = day.strftime("%Y%m%d")
    # Last hour first, then all but one (the repeated fall-back hour is two keys).
    announce_hours(app, [utc[-1], *utc[:-2]], local)
    assert run(app) == []
    # The hours of the neighbouring days complete nothing.
    announce_hours(app, [utc[0] - timedelta(hours=1), utc[-1] + timedelta(hours=1)], local)
    assert run(app) == []
    announce_hours(app, [utc[-2]], local)
    [msg] = run(app)
    assert msg.spec == f"datestamp={local}"
    assert msg.derived_from is not None and len(msg.derived_from.inputs) == hours


def test_calendar_month_from_days_derived_by_another_rule(app: App) -> None:
    app.publisher.register_table("web", "daily", ["month", "datestamp"])
    app.rules.add("web.daily", name="monthly", kind="calendar", params={
        "key": "datestamp", "keyFormat": "YYYY-MM-DD", "into": "month", "intoFormat": "YYYY-MM"})
    first = date(2026, 2, 1)
    for d in range(28):
        day = first + timedelta(days=d)
        app.publisher.send_mark_set_done("web", "daily", {"month": "2026-02",
                                                          "datestamp": day.isoformat()})
        assert run(app) == [] or d == 27
    [msg] = derived(app)
    assert msg.spec == "month=2026-02" and msg.derived_from is not None
    assert len(msg.derived_from.inputs) == 28


def test_bad_values_of_the_key_are_not_counted(app: App) -> None:
    hourly(app, "UTC")
    hours = utc_hours(date(2026, 1, 1), "UTC")
    announce_hours(app, hours[:-1], "20260101")
    app.publisher.announce_partitions("web", "hits", [{"datestamp": "20260101",
                                                       "hour": "2026010124"}])  # no hour 24
    assert run(app) == []
    announce_hours(app, hours[-1:], "20260101")
    assert len(run(app)) == 1


def test_dry_run_shows_what_would_be_derived_without_writing(app: App) -> None:
    regions(app)
    for ds in ("20260101", "20260102"):
        for r in ("us", "eu", "apac"):
            app.publisher.announce_partitions("sales", "orders", [{"datestamp": ds,
                                                                   "region": r}])
    app.publisher.announce_partitions("sales", "orders", [{"datestamp": "20260103",
                                                           "region": "us"}])
    report = app.rules.dry_run("sales.orders", name="regions")
    assert [d["spec"] for d in report["wouldDerive"]] == [  # type: ignore[index,union-attr]
        "datestamp=20260101", "datestamp=20260102"]
    assert report["pending"] == [{"spec": "datestamp=20260103", "missing": ["apac", "eu"]}]
    assert derived(app) == []
    # A definition not stored can be tried too.
    other = app.rules.dry_run("sales.orders", kind="all-of", params={
        "key": "region", "values": ["us"], "by": ["datestamp"]})
    assert len(other["wouldDerive"]) == 3  # type: ignore[arg-type]
    assert [r.name for r in app.rules.rules("sales.orders")] == ["regions"]


def test_open_inputs_and_firings_are_purged_after_their_retention(app: App) -> None:
    from sqlalchemy import text

    from partition_notify.rules.store import (
        FIRING_RETENTION_SECONDS,
        INPUT_RETENTION_SECONDS,
        RuleStore,
    )

    def rows() -> tuple[int, int]:
        with app.store.engine.connect() as conn:
            return (int(conn.execute(text("SELECT count(*) FROM pn_rule_inputs")).scalar_one()),
                    int(conn.execute(text("SELECT count(*) FROM pn_rule_firings")).scalar_one()))

    regions(app)
    for ds, values in (("20260101", ("us", "eu", "apac")), ("20260102", ("us",))):
        for r in values:
            app.publisher.announce_partitions("sales", "orders", [{"datestamp": ds,
                                                                   "region": r}])
    assert len(run(app)) == 1
    assert rows() == (1, 1)  # the fired spec's inputs went with its firing
    store, now = RuleStore(app.store), app.store.clock()
    assert store.purge(now + INPUT_RETENTION_SECONDS - 60, batch_size=10) == 0
    assert store.purge(now + INPUT_RETENTION_SECONDS + 60, batch_size=10) == 1
    assert rows() == (0, 1)
    assert store.purge(now + FIRING_RETENTION_SECONDS + 60, batch_size=10) == 1
    assert rows() == (0, 0)


def test_an_expectation_counts_a_derived_set_done(app: App) -> None:
    from datetime import UTC

    regions(app)
    app.deadlines.add("sales", "orders", name="daily", spec_template="datestamp={{ ds_nodash }}",
                      cron="0 0 * * *", deadline="+6h")
    today = datetime.now(UTC).date()
    ds = today.strftime("%Y%m%d")
    for r in ("us", "eu", "apac"):
        app.publisher.announce_partitions("sales", "orders", [{"datestamp": ds, "region": r}])
    assert len(run(app)) == 1
    deadline = datetime(today.year, today.month, today.day, 6, tzinfo=UTC) + timedelta(days=1)
    report = app.deadlines.checker(clock=lambda: deadline.timestamp() + 60,
                                   lookback_seconds=3600).check()
    assert report.on_time == 1 and report.late == []
