"""Exactly once into Airflow through an AssetWatcher: a set-done handed over is never again.

Real Airflow metadata DB (``Trigger.submit_event``, what the triggerer calls
with each trigger event), real store (SQLite, PostgreSQL). The redelivery: the
triggerer took a set-done from the trigger and the trigger never resumed (the
triggerer was killed, or the trigger was reassigned to another triggerer while
the first still ran it); the trigger starting again on the same cursor must
not hand the same set-done over a second time.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.integrations.test_airflow_event_trigger import (  # noqa: F401  (fixture)
    EVENT_TIMEOUT,
    _take,
    _trigger,
    setup,
)


def _watched_asset(name: str) -> tuple[int, int]:
    """An asset with a watcher trigger, as the DAG processor stores one: (trigger, asset)."""
    from airflow.models.asset import AssetActive, AssetModel, AssetWatcherModel
    from airflow.models.trigger import Trigger
    from airflow.utils.session import create_session

    with create_session() as session:
        asset = AssetModel(name=name, uri=name)
        session.add(asset)
        session.add(AssetActive.for_asset(asset))
        trigger = Trigger(classpath="partition_notify.integrations.airflow.triggers."
                                    "PartitionSetDoneEventTrigger", kwargs={})
        session.add(trigger)
        session.flush()
        session.add(AssetWatcherModel(name=name, asset_id=asset.id, trigger_id=trigger.id))
        return trigger.id, asset.id


def _asset_events(asset_id: int) -> list[dict[str, Any]]:
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return [e.extra["payload"] for e in session.scalars(
            select(AssetEvent).where(AssetEvent.asset_id == asset_id))]


def test_a_set_done_taken_by_the_triggerer_is_not_handed_over_again(
        setup: Any, store_url: str) -> None:  # noqa: F811
    from airflow.models.trigger import Trigger
    from airflow.triggers.base import TriggerEvent
    from partition_notify.integrations import shared

    app, conn_id = setup
    trigger_id, asset_id = _watched_asset(f"pn_once_{store_url.split(':')[0]}")

    async def first_life() -> dict[str, Any]:
        events = _trigger(conn_id, cursor="once").run()
        first = asyncio.ensure_future(anext(events))
        await asyncio.to_thread(shared.armed.wait_for, 1, EVENT_TIMEOUT)
        await asyncio.to_thread(app.publisher.send_mark_set_done, "sales", "orders",
                                "datestamp=20110501")
        payload: dict[str, Any] = (await asyncio.wait_for(first, EVENT_TIMEOUT)).payload
        return payload  # taken; the generator never resumes: the triggerer dies here

    taken = asyncio.run(first_life())
    Trigger.submit_event(trigger_id, TriggerEvent(taken))
    shared.close_all()

    async def second_life() -> list[dict[str, Any]]:
        events = _trigger(conn_id, cursor="once").run()
        nxt = asyncio.ensure_future(_take(events, 1))
        await asyncio.to_thread(shared.armed.wait_for, 1, EVENT_TIMEOUT)
        await asyncio.to_thread(app.publisher.send_mark_set_done, "sales", "orders",
                                "datestamp=20110502")  # the next one: proves it is following
        got = await asyncio.wait_for(nxt, EVENT_TIMEOUT)
        await events.aclose()
        return got

    again = asyncio.run(second_life())
    for payload in again:
        Trigger.submit_event(trigger_id, TriggerEvent(payload))
    assert [e["spec"] for e in again] == ["datestamp=20110502"]  # main: 20110501 again
    keys = [e["key"] for e in _asset_events(asset_id)]
    assert keys == [taken["key"], again[0]["key"]] and len(set(keys)) == 2
