"""``partition_set_done_sensor`` refuses arguments that made it silently wrong.

Found running the README's Dagster example with other values: ``max_events_per_tick=0``
read nothing at every tick and kept its cursor (a sensor that never reports, no
error); ``-1`` became SQL ``LIMIT -1`` (no limit at all on SQLite); a negative
``minimum_interval_seconds`` or ``start_event_id`` was taken as given. Each is now a
:class:`ValidationError` when the sensor is defined, naming the argument, the value and
the accepted range. Real Dagster, real SQLite store.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integrations.test_dagster import pn_app  # noqa: F401  (fixture)

BAD = [
    ("max_events_per_tick", 0, "1 to 100000"),
    ("max_events_per_tick", -1, "1 to 100000"),
    ("max_events_per_tick", 100_001, "1 to 100000"),
    ("max_events_per_tick", True, "1 to 100000"),
    ("max_events_per_tick", 2.5, "1 to 100000"),
    ("minimum_interval_seconds", -5, "1 to 86400"),
    ("minimum_interval_seconds", 0, "1 to 86400"),
    ("start_event_id", -1, "0 to"),
    ("start_event_id", "3", "0 to"),
]


@pytest.mark.parametrize(("arg", "value", "expected"), BAD)
def test_a_bad_sensor_argument_is_refused_by_name(
        pn_app: Any, arg: str, value: object, expected: str) -> None:  # noqa: F811
    from partition_notify.integrations.dagster.sensors import partition_set_done_sensor

    from partition_notify.core.errors import ValidationError

    with pytest.raises(ValidationError) as raised:
        partition_set_done_sensor("sales_orders", "sales.orders", settings=pn_app.settings,
                                  **{arg: value})
    msg = str(raised.value)
    assert msg.startswith(f"{arg} {value!r}: expected"), msg
    assert expected in msg, msg


def test_one_event_per_tick_is_accepted_and_moves_on(pn_app: Any) -> None:  # noqa: F811
    import dagster as dg
    from partition_notify.integrations.dagster.sensors import partition_set_done_sensor

    for ds in ("20110201", "20110202"):
        pn_app.publisher.send_mark_set_done("sales", "orders", f"datestamp={ds}/region=us")
    sensor = partition_set_done_sensor("sales_orders", "sales.orders", settings=pn_app.settings,
                                       max_events_per_tick=1, minimum_interval_seconds=1)
    instance = dg.DagsterInstance.ephemeral()
    cursor = None
    seen = []
    for _ in range(2):
        result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
        seen.append(len(result.asset_events))
        cursor = result.cursor
    assert (seen, cursor) == ([1, 1], "2")
