"""The Airflow sensor (poke) and trigger hand over the NEWEST covering set-done.

A set done again (re-run at a newer revision, a backfill) carries the revision
the downstream task must read at; the first one sent it to stale data. Real
store (SQLite and PostgreSQL), embedded transport, Airflow's own classes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from partition_notify.app import build_app


def _done_twice(app: Any) -> tuple[Any, Any]:
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    a = app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110228", revision=1)
    b = app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110228/region=us",
                                         revision=2)
    return a, b


def test_poke_and_trigger_answer_the_newest(
    airflow_home: object, pn_connection: Callable[..., str], store_url: str
) -> None:
    from partition_notify.integrations.airflow.sensors import PartitionSetDoneSensor
    from partition_notify.integrations.airflow.triggers import PartitionSetDoneTrigger

    conn_id = pn_connection("pn_newest", extra={"store_url": store_url,
                                                 "transport_url": "embedded://"})
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        a, b = _done_twice(app)
        sensor = PartitionSetDoneSensor(task_id="wait", table="sales.orders",
                                        spec="datestamp=20110228/region=us", conn_id=conn_id,
                                        deferrable=False)
        poked = sensor.poke({})
        assert poked.is_done
        assert (poked.xcom_value["eventId"], poked.xcom_value["revision"]) == (b.event_id, 2)

        async def fire(spec: str) -> dict[str, Any]:
            trigger = PartitionSetDoneTrigger(table="sales.orders", spec=spec,
                                              deadline=time.time() + 60, conn_id=conn_id)
            event = await asyncio.wait_for(anext(trigger.run()), 60)
            return dict(event.payload)

        fired = asyncio.run(fire("datestamp=20110228/region=us"))
        assert fired["status"] == "done", fired
        assert (fired["message"]["eventId"], fired["message"]["revision"]) == (b.event_id, 2)
        # Only the broader set covers region=eu: its one completion.
        eu = asyncio.run(fire("datestamp=20110228/region=eu"))
        assert eu["message"]["eventId"] == a.event_id


def test_poke_and_trigger_skip_a_damaged_newest_row(
    airflow_home: object, pn_connection: Callable[..., str], store_url: str
) -> None:
    """A newest retention row that no longer decodes (tests/store/test_damaged_retention.py)
    is skipped: poke and the trigger hand over the valid older one, not an error."""
    from partition_notify.integrations.airflow.sensors import PartitionSetDoneSensor
    from partition_notify.integrations.airflow.triggers import PartitionSetDoneTrigger

    from tests.store.test_damaged_retention import DAMAGE, insert_damaged

    conn_id = pn_connection("pn_damaged", extra={"store_url": store_url,
                                                  "transport_url": "embedded://"})
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        app.publisher.register_table("sales", "orders", ["datestamp", "region"])
        good = app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110228")
        info = app.store.catalog.get_table("sales", "orders")
        body = app.store.retention.set_done_covering(info, [good.spec])[0]
        insert_damaged(app.store.engine, good, info.id, DAMAGE["cut-short"](body))
        sensor = PartitionSetDoneSensor(task_id="wait", table="sales.orders",
                                        spec="datestamp=20110228/region=us", conn_id=conn_id,
                                        deferrable=False)
        poked = sensor.poke({})
        assert poked.is_done and poked.xcom_value["eventId"] == good.event_id

        async def fire() -> dict[str, Any]:
            trigger = PartitionSetDoneTrigger(table="sales.orders", spec="datestamp=20110228",
                                              deadline=time.time() + 60, conn_id=conn_id)
            event = await asyncio.wait_for(anext(trigger.run()), 60)
            return dict(event.payload)

        fired = asyncio.run(fire())
        assert fired["status"] == "done" and fired["message"]["eventId"] == good.event_id, fired
