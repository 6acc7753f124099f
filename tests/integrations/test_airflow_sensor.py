"""PartitionSetDoneSensor under Airflow's own dag.test(): deferred, woken, downstream runs."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.transports.stomp_helpers import build, stomp_spec

DATE = datetime(2011, 2, 28, tzinfo=UTC)
#: dag.test() first syncs the DAG folder and runs the task in-process; the
#: first one of a session took 31-39 s here, once over 60 s at load ~19.
ARM_TIMEOUT = 300.0


def _sensor_dag(dag_id: str) -> Any:
    from tests.integrations.dags.pn_sensor_dags import SENSOR_DAGS, sensor_dag

    conn_id, timeout = SENSOR_DAGS[dag_id]
    return sensor_dag(dag_id, conn_id, timeout)


def _publish_once_armed(app: Any, spec: str, errors: list[BaseException]) -> threading.Thread:
    """Mark ``spec`` done as soon as the deferred trigger is subscribed (no sleep)."""
    from partition_notify.integrations import shared

    def go() -> None:
        try:
            assert shared.armed.wait_for(1, ARM_TIMEOUT), "trigger never subscribed"
            app.publisher.send_mark_set_done("sales", "orders", spec)
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def _states(dr: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}


def _run_dag_with_set_done(app: Any, conn_id: str, dag_id: str, published_spec: str) -> Any:
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    errors: list[BaseException] = []
    t = _publish_once_armed(app, published_spec, errors)
    dr = _sensor_dag(dag_id).test(logical_date=DATE)
    t.join(5)
    assert not errors, errors
    return dr


def _downstream_value(dr: Any) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    query = XComModel.get_many(
        run_id=dr.run_id, dag_ids=dr.dag_id, task_ids="downstream", key="return_value"
    )
    with create_session() as session:
        row = session.scalars(query).first()
        assert row is not None, "downstream pushed no XCom"
        return XComModel.deserialize_value(row)


@pytest.mark.parametrize("published", ["datestamp=20110228/region=us", "datestamp=20110228"])
def test_sensor_defers_and_wakes_on_embedded_store(
    airflow_home: object, pn_connection: Callable[..., str], tmp_path: Any, published: str
) -> None:
    """Exact and coarser set-done both wake the sensor; XCom carries the message."""
    from partition_notify.app import build_app

    store_url = f"sqlite:///{tmp_path}/pn.db"
    conn_id = pn_connection("pn_embedded", extra={"store_url": store_url,
                                                   "transport_url": "embedded://"})
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        dr = _run_dag_with_set_done(app, conn_id, "pn_sensor_embedded", published)
    assert _states(dr) == {"wait": "success", "downstream": "success"}, _states(dr)
    value = _downstream_value(dr)
    key = "20110228|us" if published.endswith("us") else "20110228"
    assert str(value).startswith(key + "@"), value


@pytest.mark.broker
def test_sensor_defers_and_wakes_over_activemq(
    airflow_home: object, pn_connection: Callable[..., str], store_url: str
) -> None:
    spec = stomp_spec("activemq")
    conn_id = pn_connection(
        "pn_activemq",
        extra={"store_url": store_url, "transport_url": spec.url},
        login=spec.username, password=spec.password,
    )
    with build(spec, store_url) as app:
        dr = _run_dag_with_set_done(app, conn_id, "pn_sensor_activemq",
                                    "datestamp=20110228/region=us")
    assert _states(dr) == {"wait": "success", "downstream": "success"}, _states(dr)
    assert str(_downstream_value(dr)).startswith("20110228|us@")


def test_sensor_timeout_fails_cleanly(
    airflow_home: object, pn_connection: Callable[..., str], tmp_path: Any
) -> None:
    """Nothing is marked done: the sensor fails at its timeout, downstream never runs."""
    from partition_notify.app import build_app

    store_url = f"sqlite:///{tmp_path}/pn.db"
    pn_connection("pn_timeout", extra={"store_url": store_url,
                                                  "transport_url": "embedded://"})
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        app.publisher.register_table("sales", "orders", ["datestamp", "region"])
        app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110227")  # another day
    dr = _sensor_dag("pn_sensor_timeout").test(logical_date=DATE)
    states = _states(dr)
    assert states["wait"] == "failed", states
    assert states["downstream"] in {"upstream_failed", "None"}, states


@pytest.mark.broker
def test_many_deferred_triggers_share_one_connection_and_never_block_the_loop(
    airflow_home: object, pn_connection: Callable[..., str], sqlite_url: str
) -> None:
    """20 triggers on one loop over ActiveMQ: one Subscriber, the loop never stalls."""
    import asyncio
    import time

    from partition_notify.integrations import shared
    from partition_notify.integrations.airflow.triggers import PartitionSetDoneTrigger

    from tests.integrations.test_airflow_event_trigger import MAX_LOOP_STALL_SECONDS, Ticker

    spec = stomp_spec("activemq")
    conn_id = pn_connection("pn_many", extra={"store_url": sqlite_url, "transport_url": spec.url},
                            login=spec.username, password=spec.password)
    n = 20
    with build(spec, sqlite_url) as app:
        app.publisher.register_table("sales", "orders", ["datestamp", "region"])

        async def main() -> list[dict[str, Any]]:
            ticker = Ticker()
            ticker.start()
            triggers = [
                PartitionSetDoneTrigger(table="sales.orders", spec=f"datestamp=2011{i:04d}",
                                        deadline=time.time() + 120, conn_id=conn_id)
                for i in range(n)
            ]
            runs = [asyncio.ensure_future(anext(t.run())) for t in triggers]
            await asyncio.to_thread(shared.armed.wait_for, n, ARM_TIMEOUT)
            for i in range(n):
                await asyncio.to_thread(app.publisher.send_mark_set_done, "sales", "orders",
                                        f"datestamp=2011{i:04d}")
            events = [e.payload for e in await asyncio.wait_for(asyncio.gather(*runs), 60)]
            ticker.stop()
            assert ticker.worst < MAX_LOOP_STALL_SECONDS, f"loop stalled {ticker.worst:.3f} s"
            return events

        events = asyncio.run(main())
    assert [e["message"]["partition_key"] for e in events] == [f"2011{i:04d}" for i in range(n)]
    assert len(shared._entries) == 1
