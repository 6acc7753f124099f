"""Settings come from an Airflow Connection; secrets never travel in trigger kwargs."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest


def test_connection_maps_to_settings(airflow_home: object,
                                     pn_connection: Callable[..., str]) -> None:
    from partition_notify.integrations.airflow.connection import get_settings

    conn_id = pn_connection("pn_conn", extra={"store_url": "sqlite:///x.db",
                                              "transport_url": "stomp://h:61613",
                                              "connect_timeout_seconds": 3},
                            login="reader", password="s3cret")
    s = get_settings(conn_id)
    assert (s.store_url, s.transport_url, s.broker_username) == (
        "sqlite:///x.db", "stomp://h:61613", "reader")
    assert s.broker_password is not None and s.broker_password.get_secret_value() == "s3cret"
    assert s.connect_timeout_seconds == 3


@pytest.mark.parametrize(("extra", "named"), [
    ({"store_ur": "sqlite:///x.db"}, "store_ur"),
    ({"broker_password": "leak"}, "broker_password"),
    ({"connect_timeout_seconds": -1}, "connect_timeout_seconds"),
])
def test_bad_connection_extra_is_named(airflow_home: object, pn_connection: Callable[..., str],
                                       extra: dict[str, object], named: str) -> None:
    from partition_notify.integrations.airflow.connection import get_settings

    from partition_notify.core.errors import ConfigurationError

    conn_id = pn_connection("pn_bad", extra=extra)
    with pytest.raises(ConfigurationError, match=named):
        get_settings(conn_id)


def test_trigger_kwargs_hold_no_connection_details(airflow_home: object) -> None:
    from partition_notify.integrations.airflow.triggers import (
        PartitionSetDoneEventTrigger,
        PartitionSetDoneTrigger,
    )

    _, deferred = PartitionSetDoneTrigger(table="sales.orders", spec="datestamp=1",
                                          deadline=time.time(), conn_id="pn").serialize()
    _, event = PartitionSetDoneEventTrigger(table="sales.orders", conn_id="pn").serialize()
    assert set(deferred) == {"table", "spec", "deadline", "conn_id"}
    assert set(event) == {"table", "spec", "cursor", "conn_id"}


def test_connection_type_is_registered_and_testable(
    airflow_home: object, pn_connection: Callable[..., str], tmp_path: object
) -> None:
    from airflow.providers_manager import ProvidersManager
    from partition_notify.integrations.airflow.hook import PartitionNotifyHook

    hooks = ProvidersManager().hooks
    assert hooks["partition_notify"] is not None
    assert hooks["partition_notify"].hook_class_name == (
        "partition_notify.integrations.airflow.hook.PartitionNotifyHook")
    ok = pn_connection("pn_ok", extra={"store_url": f"sqlite:///{tmp_path}/pn.db"})
    assert PartitionNotifyHook(ok).test_connection()[0]
    bad = pn_connection("pn_typo", extra={"stor_url": "x"})
    passed, message = PartitionNotifyHook(bad).test_connection()
    assert not passed and "stor_url" in message
