"""The AssetWatcher event trigger: forward from a durable cursor, restart-safe, MessageQueueTrigger.

The trigger's run() is driven the way the triggerer drives it (``async for``
on one event loop); a ticker on the same loop proves nothing blocks it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

#: Longest the event loop may be held while triggers set up and wait. A wait,
#: connect or subscribe done on the loop would hold it for the whole wait
#: (seconds); what remains on 2 shared cores is GIL contention with the
#: subscriber threads (0.32 s seen with 20 triggers over ActiveMQ).
MAX_LOOP_STALL_SECONDS = 0.75
EVENT_TIMEOUT = 30.0


class Ticker:
    """Measures the longest gap between 10 ms ticks on the running loop."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            self.worst = max(self.worst, now - last - 0.01)
            last = now

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()


async def _take(events: AsyncIterator[Any], n: int) -> list[dict[str, Any]]:
    out = []
    for _ in range(n):
        ev = await asyncio.wait_for(anext(events), EVENT_TIMEOUT)
        out.append(ev.payload)
    return out


async def _nothing_more(events: AsyncIterator[Any], app: Any) -> None:
    """No further event: a sentinel set-done published now must be the next one out."""
    await asyncio.to_thread(app.publisher.send_mark_set_done, "sales", "orders",
                            "datestamp=29991231")
    (sentinel,) = await _take(events, 1)
    assert sentinel["spec"] == "datestamp=29991231", sentinel


@pytest.fixture
def setup(airflow_home: object, pn_connection: Callable[..., str], store_url: str) -> Any:
    """An app on the parametrised store (SQLite, PostgreSQL) and a connection to it."""
    from partition_notify.app import build_app

    conn_id = pn_connection("pn_events", extra={"store_url": store_url,
                                                 "transport_url": "embedded://"})
    app = build_app(store_url=store_url, transport_url="embedded://")
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    yield app, conn_id
    app.close()


def _trigger(conn_id: str, **kw: Any) -> Any:
    from partition_notify.integrations.airflow.triggers import PartitionSetDoneEventTrigger

    return PartitionSetDoneEventTrigger(table="sales.orders", conn_id=conn_id, **kw)


def test_one_event_per_set_done_after_the_cursor(setup: Any) -> None:
    app, conn_id = setup
    from partition_notify.integrations import shared

    app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110227")  # before: not sent

    async def main() -> None:
        ticker = Ticker()
        ticker.start()
        events = _trigger(conn_id, cursor="t1").run()
        first = asyncio.ensure_future(anext(events))
        await asyncio.to_thread(shared.armed.wait_for, 1, EVENT_TIMEOUT)
        pub = app.publisher
        await asyncio.to_thread(pub.announce_partitions, "sales", "orders",
                                ["datestamp=20110228/region=us"])  # add-partition: ignored
        await asyncio.to_thread(pub.send_mark_set_done, "sales", "orders",
                                "datestamp=20110228/region=us")
        await asyncio.to_thread(pub.send_mark_set_done, "sales", "orders", "datestamp=20110301")
        got = [(await asyncio.wait_for(first, EVENT_TIMEOUT)).payload, *await _take(events, 1)]
        assert [e["partition_key"] for e in got] == ["20110228|us", "20110301"]
        assert got[0]["partition"] == {"datestamp": "20110228", "region": "us"}
        assert got[0]["eventId"] < got[1]["eventId"]
        await _nothing_more(events, app)
        await events.aclose()
        ticker.stop()
        assert ticker.worst < MAX_LOOP_STALL_SECONDS, f"event loop stalled {ticker.worst:.3f} s"

    asyncio.run(main())


def test_restart_resumes_after_the_last_event_handed_over(setup: Any) -> None:
    """Events handed over are never re-emitted, the one in flight when the process
    dies (taken, not yet followed by a request for the next) included: the cursor
    moves before the hand-over (issue 21, exactly once into schedulers;
    tests/integrations/test_exactly_once_watcher.py submits them to Airflow).
    """
    app, conn_id = setup
    from partition_notify.integrations import shared

    def mark(day: str) -> Any:
        return asyncio.to_thread(app.publisher.send_mark_set_done, "sales", "orders",
                                 f"datestamp={day}")

    async def first_life() -> list[int]:
        events = _trigger(conn_id, cursor="restart").run()
        first = asyncio.ensure_future(anext(events))
        await asyncio.to_thread(shared.armed.wait_for, 1, EVENT_TIMEOUT)
        await mark("20110301")
        await mark("20110302")
        got = [(await asyncio.wait_for(first, EVENT_TIMEOUT)).payload, *await _take(events, 1)]
        await mark("20110303")
        got += await _take(events, 1)  # handing it over stored the cursor at 20110303
        return [int(e["eventId"]) for e in got]  # ... and the process dies here

    ids = asyncio.run(first_life())
    shared.close_all()
    assert _cursor(app, "restart") == ids[2]
    app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110304")  # while down

    async def second_life() -> None:
        events = _trigger(conn_id, cursor="restart").run()
        got = await _take(events, 1)
        assert [e["partition_key"] for e in got] == ["20110304"], got  # main: 20110303 too
        assert got[0]["eventId"] > ids[2]
        await _nothing_more(events, app)
        await events.aclose()

    asyncio.run(second_life())


def _cursor(app: Any, name: str) -> int:
    from partition_notify.store.cursors import Cursors

    cur = Cursors(app.store).get(name)
    return -1 if cur is None else cur.event_id


def test_spec_filter_keeps_relevant_set_dones(setup: Any) -> None:
    app, conn_id = setup
    from partition_notify.integrations import shared

    async def main() -> None:
        events = _trigger(conn_id, spec="region=us", cursor="us").run()
        first = asyncio.ensure_future(anext(events))
        await asyncio.to_thread(shared.armed.wait_for, 1, EVENT_TIMEOUT)
        for s in ("datestamp=20110228/region=eu", "datestamp=20110228",
                  "datestamp=20110301/region=us"):
            await asyncio.to_thread(app.publisher.send_mark_set_done, "sales", "orders", s)
        got = [(await asyncio.wait_for(first, EVENT_TIMEOUT)).payload, *await _take(events, 1)]
        assert [e["spec"] for e in got] == ["datestamp=20110228", "datestamp=20110301/region=us"]
        await events.aclose()

    asyncio.run(main())


def test_message_queue_trigger_resolves_to_ours_and_fires(setup: Any) -> None:
    app, conn_id = setup
    from airflow.providers.common.messaging.triggers.msg_queue import MessageQueueTrigger
    from airflow.sdk import Asset, AssetWatcher
    from partition_notify.integrations import shared
    from partition_notify.integrations.airflow.triggers import PartitionSetDoneEventTrigger

    mq = MessageQueueTrigger(scheme="partition-notify", table="sales.orders", conn_id=conn_id,
                             cursor="mq")
    assert isinstance(mq.trigger, PartitionSetDoneEventTrigger)
    classpath, kwargs = mq.serialize()
    assert classpath == (
        "partition_notify.integrations.airflow.triggers.PartitionSetDoneEventTrigger")
    assert kwargs == {"table": "sales.orders", "spec": None, "cursor": "mq", "conn_id": conn_id}
    # An AssetWatcher accepts it (event triggers only).
    Asset("sales_orders", watchers=[AssetWatcher(name="pn", trigger=mq)])

    async def main() -> None:
        events = mq.run()
        first = asyncio.ensure_future(anext(events))
        await asyncio.to_thread(shared.armed.wait_for, 1, EVENT_TIMEOUT)
        await asyncio.to_thread(app.publisher.send_mark_set_done, "sales", "orders",
                                "datestamp=20110228/region=us")
        ev = (await asyncio.wait_for(first, EVENT_TIMEOUT)).payload
        assert ev["partition_key"] == "20110228|us" and ev["status"] == "done"
        await events.aclose()

    asyncio.run(main())


def test_bad_spec_filter_fails_with_the_field(setup: Any) -> None:
    from partition_notify.core.errors import InvalidSpecError

    _, conn_id = setup

    async def main() -> None:
        await anext(_trigger(conn_id, spec="colour=red").run())

    with pytest.raises(InvalidSpecError, match="colour"):
        asyncio.run(main())
