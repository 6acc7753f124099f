"""The quiet-period rule on SQLite and PostgreSQL: fires once N s after the last new partition.

Real stores, the embedded transport, the evaluator ``serve`` runs; the store's
clock is injected, so the quiet period passes without waiting (the real-process
test with a real timer is tests/serve/test_quiet_rule_serve.py).
"""

from __future__ import annotations

import threading

import pytest

from partition_notify.app import App, build_app
from partition_notify.core.errors import ValidationError
from partition_notify.rules.evaluator import RunReport
from tests.rules.test_evaluator import derived
from tests.support.clock import FakeClock, app_on_clock

QUIET = 60


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_800_000_000.0)


app = pytest.fixture(name="app")(app_on_clock)


def quiet_rule(app: App) -> None:
    app.publisher.register_table("web", "clicks", ["datestamp", "hour"])
    app.rules.add("web.clicks", name="settled", kind="quiet",
                  params={"by": ["datestamp"], "quietSeconds": QUIET})


def announce(app: App, day: str, hour: str) -> None:
    app.publisher.announce_partitions("web", "clicks", [{"datestamp": day, "hour": hour}])


def run(app: App) -> RunReport:
    return app.rules.evaluator().run_once()


def test_fires_once_when_no_new_partition_came_for_the_period(app: App,
                                                               clock: FakeClock) -> None:
    quiet_rule(app)
    announce(app, "20260301", "00")
    announce(app, "20260301", "01")
    assert run(app).derived == []
    clock.advance(QUIET - 1)
    announce(app, "20260301", "02")  # a new partition: the period starts again
    announce(app, "20260302", "00")
    assert run(app).derived == []
    assert app.rules.evaluator().next_due() == clock() + QUIET
    clock.advance(QUIET - 1)
    assert run(app).derived == []
    clock.advance(1)
    report = run(app)
    assert sorted(m.spec for m in report.derived) == ["datestamp=20260301",
                                                      "datestamp=20260302"]
    first = next(m for m in report.derived if m.spec == "datestamp=20260301")
    assert first.derived_from is not None and first.derived_from.kind == "quiet"
    assert [i.value for i in first.derived_from.inputs] == [
        "datestamp=20260301/hour=00", "datestamp=20260301/hour=01", "datestamp=20260301/hour=02"]
    # Once per (rule, spec): a partition after the firing is late, no second set-done.
    announce(app, "20260301", "03")
    clock.advance(2 * QUIET)
    late = run(app)
    assert late.derived == [] and late.late_inputs == 1
    assert len(derived(app)) == 2 and app.rules.evaluator().next_due() is None


def test_a_set_done_neither_counts_nor_restarts_the_period_and_covers(
        app: App, clock: FakeClock) -> None:
    quiet_rule(app)
    announce(app, "20260301", "00")
    run(app)
    app.publisher.send_mark_set_done("web", "clicks", "datestamp=20260301")  # the writer said it
    clock.advance(QUIET)
    report = run(app)
    assert report.derived == [] and report.already_done == 1
    assert derived(app) == []


def test_an_unread_partition_holds_the_firing(app: App, clock: FakeClock) -> None:
    """A partition logged after the rule's last read is checked inside the firing
    transaction: the period starts again, nothing fires early."""
    quiet_rule(app)
    announce(app, "20260301", "00")
    ev = app.rules.evaluator()
    ev.run_once()
    clock.advance(QUIET)
    announce(app, "20260301", "01")  # not read by the rule yet
    rule = ev.store.rules()[0]
    target = app.publisher.table("web", "clicks")
    tables = {t.qualified: t for t in app.store.catalog.tables()}
    from partition_notify.rules.evaluator import definition
    from partition_notify.rules.kinds import Quiet

    kind = definition(rule, tables, target)
    assert isinstance(kind, Quiet)
    fired, _ = ev.quiet.fire_due(rule, kind, target,
                                 lambda s, o: ev._draft(target, rule, kind, s, o))
    assert fired == [] and derived(app) == []
    assert run(app).derived == []  # now read: counted, the period restarted
    clock.advance(QUIET)
    assert [m.spec for m in run(app).derived] == ["datestamp=20260301"]


def test_two_evaluators_racing_fire_once(store_url: str, clock: FakeClock) -> None:
    apps = [build_app(store_url=store_url, transport_url="embedded://", clock=clock)
            for _ in range(2)]
    try:
        quiet_rule(apps[0])
        for d in range(1, 6):
            announce(apps[0], f"202603{d:02d}", "00")
        apps[0].rules.evaluator().run_once()
        clock.advance(QUIET)
        evaluators = [a.rules.evaluator() for a in apps]
        barrier = threading.Barrier(2)
        reports: list[RunReport] = []
        errors: list[BaseException] = []

        def race(i: int) -> None:
            try:
                barrier.wait(timeout=30)
                reports.append(evaluators[i].run_once())
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=race, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors and not any(t.is_alive() for t in threads)
        assert sorted(m.spec for m in derived(apps[0])) == [
            f"datestamp=202603{d:02d}" for d in range(1, 6)]
        assert sum(len(r.derived) for r in reports) == 5
    finally:
        for a in apps:
            a.close()


def test_dry_run_and_bad_definitions(app: App, clock: FakeClock) -> None:
    app.publisher.register_table("web", "clicks", ["datestamp", "hour"])
    announce(app, "20260301", "00")
    announce(app, "20260302", "00")
    clock.advance(QUIET - 1)
    announce(app, "20260302", "01")
    clock.advance(1)
    report = app.rules.dry_run("web.clicks", kind="quiet",
                               params={"by": ["datestamp"], "quietSeconds": QUIET})
    assert [d["spec"] for d in report["wouldDerive"]] == ["datestamp=20260301"]
    assert [p["spec"] for p in report["pending"]] == ["datestamp=20260302"]
    for params, field in (({"by": ["datestamp"]}, "quietSeconds"),
                          ({"by": ["datestamp"], "quietSeconds": 0}, "quietSeconds"),
                          ({"by": ["datestamp"], "quietSeconds": "60"}, "quietSeconds"),
                          ({"by": ["nope"], "quietSeconds": 60}, "by")):
        with pytest.raises(ValidationError, match=f"rule {field} "):
            app.rules.add("web.clicks", name="q", kind="quiet", params=params)
