"""Withdrawals in the schedulers: no run for a withdrawn key, recorded in Dagster.

Real Airflow (the AssetWatcher's event trigger driven the way the triggerer
drives it, on the parametrised store) and real Dagster (the sensor's ticks
recorded in an instance, AutomationCondition evaluated on it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tests.integrations.test_airflow_event_trigger import EVENT_TIMEOUT, _take, _trigger
from tests.integrations.test_dagster import _defs, _tick

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def setup(airflow_home: object, pn_connection: Callable[..., str], store_url: str) -> Any:
    from partition_notify.app import build_app

    conn_id = pn_connection("pn_events", extra={"store_url": store_url,
                                                 "transport_url": "embedded://"})
    app = build_app(store_url=store_url, transport_url="embedded://")
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    yield app, conn_id
    app.close()


def test_the_asset_watcher_starts_no_run_for_a_withdrawn_set_done(setup: Any) -> None:
    """A triggerer catching up reads a set-done and its withdrawal in one read: the
    set-done is not handed over; the restated one is."""
    app, conn_id = setup
    from partition_notify.integrations import shared
    from partition_notify.store.cursors import Cursors

    pub = app.publisher
    start = pub.send_mark_set_done("sales", "orders", "datestamp=20110227").event_id
    Cursors(app.store).open("catch-up", start=start)  # the triggerer was down from here on
    pub.announce_partitions("sales", "orders", ["datestamp=20110228/region=us"])
    bad = pub.send_mark_set_done("sales", "orders", "datestamp=20110228")
    pub.withdraw("sales", "orders", "datestamp=20110228/region=us", reason="bad data")
    pub.announce_partitions("sales", "orders", ["datestamp=20110228/region=us"], revision=2)
    good = pub.send_mark_set_done("sales", "orders", "datestamp=20110228", revision=2)

    async def main() -> None:
        events = _trigger(conn_id, cursor="catch-up").run()
        got = await _take(events, 1)
        assert [(e["eventId"], e["partition_key"]) for e in got] == [
            (good.event_id, "20110228")], got
        await asyncio.to_thread(shared.armed.wait_for, 1, EVENT_TIMEOUT)
        # Live: a withdrawal alone (no set-done) is no TriggerEvent either.
        await asyncio.to_thread(pub.withdraw, "sales", "orders", "datestamp=20110228",
                                reason="bad again")
        await asyncio.to_thread(pub.send_mark_set_done, "sales", "orders", "datestamp=29991231")
        (sentinel,) = await _take(events, 1)
        assert sentinel["spec"] == "datestamp=29991231", sentinel
        await events.aclose()

    asyncio.run(main())
    assert bad.event_id < good.event_id


def test_the_dagster_sensor_observes_a_withdrawal_and_requests_no_run(
        dagster_available: None, tmp_path: Any) -> None:
    import dagster as dg

    from partition_notify.app import build_app

    app = build_app(store_url=f"sqlite:///{tmp_path}/pn.db", transport_url="embedded://")
    try:
        app.publisher.register_table("sales", "orders", ["datestamp", "region"])
        _, report, sensor, defs = _defs(app)
        instance = dg.DagsterInstance.ephemeral()
        first = dg.evaluate_automation_conditions(defs=defs, instance=instance)
        pub = app.publisher
        pub.send_mark_set_done("sales", "orders", "datestamp=20110301/region=us")
        done, cursor = _tick(sensor, instance, None)
        assert [str(e.partition) for e in done] == ["20110301|us"]
        second = dg.evaluate_automation_conditions(defs=defs, instance=instance,
                                                   cursor=first.cursor)
        assert second.get_requested_partitions(report.key) == {"20110301|us"}

        # Withdrawn, and a set-done withdrawn within the same tick: observed, not run.
        w = pub.withdraw("sales", "orders", "datestamp=20110301/region=us", reason="bad rows")
        pub.send_mark_set_done("sales", "orders", "datestamp=20110302/region=eu")
        pub.withdraw("sales", "orders", "datestamp=20110302", reason="late fix")
        events, _ = _tick(sensor, instance, cursor)
        assert all(isinstance(e, dg.AssetObservation) for e in events), events
        seen = sorted((str(e.partition), e.metadata["partition_notify/reason"].value)
                      for e in events)
        assert ("20110301|us", "bad rows") in seen
        assert {p for p, r in seen if r == "late fix"} == {"20110302|eu", "20110302|us"}
        obs = next(e for e in events if str(e.partition) == "20110301|us")
        assert obs.metadata["partition_notify/event_id"].value == w.event_id
        third = dg.evaluate_automation_conditions(defs=defs, instance=instance,
                                                  cursor=second.cursor)
        assert third.total_requested == 0  # an observation starts nothing
    finally:
        app.close()
