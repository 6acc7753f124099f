"""PartitionSetDoneTrigger given a bad table, spec or deadline: one error event, at once.

A trigger is built from the kwargs its sensor serialized (and those of a DAG
author's own ``defer``): a value that cannot be a deadline or a table name
must end the sensor with an ``AirflowException`` naming it, not hang in the
triggerer (NaN: ``asyncio.wait_for`` never times out) nor fail it with a
traceback.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any

import pytest

#: An error event comes from validation (and one worker-thread hop): seconds at most.
EVENT_TIMEOUT = 30.0


@pytest.fixture
def conn_id(airflow_home: object, pn_connection: Callable[..., str], tmp_path: Any) -> Any:
    from partition_notify.app import build_app

    store_url = f"sqlite:///{tmp_path}/pn.db"
    app = build_app(store_url=store_url, transport_url="embedded://")
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    yield pn_connection("pn_args", extra={"store_url": store_url,
                                          "transport_url": "embedded://"})
    app.close()


def _first_event(trigger: Any) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        ev = await asyncio.wait_for(anext(trigger.run()), EVENT_TIMEOUT)
        return dict(ev.payload)

    return asyncio.run(go())


def _trigger(conn_id: str, **kw: Any) -> Any:
    from partition_notify.integrations.airflow.triggers import PartitionSetDoneTrigger

    args: dict[str, Any] = {"table": "sales.orders", "spec": "datestamp=20110228",
                            "deadline": time.time() + 60, "conn_id": conn_id}
    return PartitionSetDoneTrigger(**{**args, **kw})


@pytest.mark.parametrize("deadline", [math.nan, math.inf, -math.inf, "soon", None])
def test_a_deadline_that_is_no_point_in_time_is_an_error_event(conn_id: str,
                                                                deadline: Any) -> None:
    event = _first_event(_trigger(conn_id, deadline=deadline))
    assert event["status"] == "error", event
    assert "deadline" in str(event["error"]), event


@pytest.mark.parametrize("table", [None, 5, ["sales", "orders"]])
def test_a_table_that_is_no_name_is_an_error_event(conn_id: str, table: Any) -> None:
    event = _first_event(_trigger(conn_id, table=table))
    assert event == {"status": "error", "error": event["error"]}
    assert str(event["error"]).startswith("InvalidNameError"), event


def test_a_past_deadline_times_out_at_once_and_a_round_trip_keeps_the_kwargs(
        conn_id: str) -> None:
    from partition_notify.integrations.airflow.triggers import PartitionSetDoneTrigger

    trigger = _trigger(conn_id, deadline=str(time.time() - 5))  # a number as text still reads
    path, kwargs = trigger.serialize()
    assert path.endswith("triggers.PartitionSetDoneTrigger")
    again = PartitionSetDoneTrigger(**kwargs)
    assert again.serialize() == (path, kwargs)
    assert _first_event(again) == {"status": "timeout", "table": "sales.orders",
                                   "spec": "datestamp=20110228"}
