"""What a DAG sees from an AssetWatcher's trigger event (docs/schedulers.md), in real Airflow."""

from __future__ import annotations

from pathlib import Path


def test_watcher_events_carry_the_set_done_in_extra_payload_and_no_partition_key(
    airflow_home: Path,
) -> None:
    from airflow.models.asset import AssetActive, AssetEvent, AssetModel, AssetWatcherModel
    from airflow.models.trigger import Trigger
    from airflow.triggers.base import TriggerEvent
    from airflow.utils.session import create_session
    from sqlalchemy import select

    payload = {"status": "done", "db": "sales", "table": "orders",
               "spec": "datestamp=20110228/region=us", "partition_key": "20110228|us"}
    with create_session() as session:
        asset = AssetModel(name="pn_watched_orders", uri="pn_watched_orders")
        session.add(asset)
        session.add(AssetActive.for_asset(asset))
        trigger = Trigger(classpath="partition_notify.integrations.airflow.triggers."
                                    "PartitionSetDoneEventTrigger", kwargs={})
        session.add(trigger)
        session.flush()
        session.add(AssetWatcherModel(name="pn_orders", asset_id=asset.id,
                                      trigger_id=trigger.id))
        trigger_id, asset_id = trigger.id, asset.id
    Trigger.submit_event(trigger_id, TriggerEvent(payload))  # what the triggerer calls
    with create_session() as session:
        (event,) = session.scalars(select(AssetEvent).where(AssetEvent.asset_id == asset_id))
        assert event.partition_key is None
        assert event.extra == {"from_trigger": True, "payload": payload}
