"""A sensor or AssetWatcher deployed before its producer's first run waits for the table.

The README promises that ``wait``, ``tail`` and ``wait_for_set_done`` wait for a
table not registered yet, "as an Airflow sensor would wait". The deferred
sensor's trigger failed at once with ``UnknownTableError``, poke mode failed
the task, and the AssetWatcher's trigger raised out of ``run()``. Each now reads
the catalog again every ``REGISTRATION_POLL_SECONDS`` (the sensor's until its
timeout, which then says the table is not registered).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

EVENT_TIMEOUT = 30.0


@pytest.fixture
def unregistered(airflow_home: object, pn_connection: Callable[..., str],
                 tmp_path: Any) -> Iterator[tuple[Any, str]]:
    """An app whose store has no table yet, and a connection to it."""
    from partition_notify.app import build_app

    store_url = f"sqlite:///{tmp_path}/pn.db"
    app = build_app(store_url=store_url, transport_url="embedded://")
    yield app, pn_connection("pn_late", extra={"store_url": store_url,
                                               "transport_url": "embedded://"})
    app.close()


def _produce(app: Any) -> None:
    """The producer's first run: it registers the table, then marks a day done."""
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110228")


async def _no_event_yet(events: Any) -> asyncio.Future[Any]:
    """The first event's future, after checking it did not come within two catalog reads
    (before the fix: an UnknownTableError event or exception at once)."""
    from partition_notify.subscriber.subscriber import REGISTRATION_POLL_SECONDS

    first = asyncio.ensure_future(anext(events))
    done, _ = await asyncio.wait({first}, timeout=2 * REGISTRATION_POLL_SECONDS)
    assert not done, first.result().payload if first.exception() is None else first.exception()
    return first


def test_the_deferred_sensor_waits_for_registration(unregistered: tuple[Any, str]) -> None:
    from partition_notify.integrations.airflow.triggers import PartitionSetDoneTrigger

    app, conn_id = unregistered

    async def go() -> dict[str, Any]:
        trigger = PartitionSetDoneTrigger(table="sales.orders", spec="datestamp=20110228",
                                          deadline=time.time() + 60, conn_id=conn_id)
        first = await _no_event_yet(trigger.run())
        await asyncio.to_thread(_produce, app)
        return dict((await asyncio.wait_for(first, EVENT_TIMEOUT)).payload)

    event = asyncio.run(go())
    assert event["status"] == "done" and event["message"]["spec"] == "datestamp=20110228", event


def test_the_sensor_times_out_saying_the_table_is_not_registered(
        unregistered: tuple[Any, str]) -> None:
    from partition_notify.integrations.airflow._compat import AirflowSensorTimeout
    from partition_notify.integrations.airflow.sensors import PartitionSetDoneSensor
    from partition_notify.integrations.airflow.triggers import PartitionSetDoneTrigger

    _, conn_id = unregistered
    trigger = PartitionSetDoneTrigger(table="sales.orders", spec="datestamp=20110228",
                                      deadline=time.time() + 1.5, conn_id=conn_id)

    async def go() -> dict[str, Any]:
        return dict((await asyncio.wait_for(anext(trigger.run()), EVENT_TIMEOUT)).payload)

    event = asyncio.run(go())
    assert event == {"status": "timeout", "table": "sales.orders",
                     "spec": "datestamp=20110228", "registered": False}
    sensor = PartitionSetDoneSensor(task_id="t", table="sales.orders",
                                    spec="datestamp=20110228", conn_id=conn_id, timeout=1)
    with pytest.raises(AirflowSensorTimeout, match=r"sales\.orders is not registered"):
        sensor.execute_complete({}, event)


def test_poke_mode_keeps_poking_until_the_table_exists(unregistered: tuple[Any, str]) -> None:
    from partition_notify.integrations.airflow.sensors import PartitionSetDoneSensor

    app, conn_id = unregistered
    sensor = PartitionSetDoneSensor(task_id="t", table="sales.orders", spec="datestamp=20110228",
                                    conn_id=conn_id, deferrable=False)
    assert sensor.poke({}) is False  # before: UnknownTableError failed the task
    _produce(app)
    assert sensor.poke({}).is_done


def test_the_asset_watcher_trigger_waits_for_registration(
        unregistered: tuple[Any, str]) -> None:
    from partition_notify.integrations.airflow.triggers import PartitionSetDoneEventTrigger

    app, conn_id = unregistered

    async def go() -> dict[str, Any]:
        events = PartitionSetDoneEventTrigger(table="sales.orders", conn_id=conn_id).run()
        try:
            first = await _no_event_yet(events)
            await asyncio.to_thread(_produce, app)
            return dict((await asyncio.wait_for(first, EVENT_TIMEOUT)).payload)
        finally:
            await events.aclose()

    event = asyncio.run(go())
    assert (event["status"], event["spec"]) == ("done", "datestamp=20110228"), event
