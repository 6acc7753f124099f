"""Dagster: the sensor reports set-dones; AutomationCondition requests exactly those partitions."""

from __future__ import annotations

from typing import Any

import pytest

REGIONS = ["eu", "us"]


@pytest.fixture
def pn_app(dagster_available: None, tmp_path: Any) -> Any:
    from partition_notify.app import build_app

    app = build_app(store_url=f"sqlite:///{tmp_path}/pn.db", transport_url="embedded://")
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    yield app
    app.close()


def _defs(app: Any) -> tuple[Any, Any, Any, Any]:
    import dagster as dg
    from partition_notify.integrations.dagster.sensors import partition_set_done_sensor

    pdef = dg.MultiPartitionsDefinition({
        "datestamp": dg.DailyPartitionsDefinition(start_date="20110201", end_date="20110310",
                                                  fmt="%Y%m%d"),
        "region": dg.StaticPartitionsDefinition(REGIONS),
    })
    orders = dg.AssetSpec("sales_orders", partitions_def=pdef)
    # eager() minus its latest-time-window clause: late and backfilled days run too.
    condition = dg.AutomationCondition.eager().without(
        dg.AutomationCondition.in_latest_time_window())

    @dg.asset(deps=[orders], partitions_def=pdef, automation_condition=condition)
    def orders_report() -> None: ...

    sensor = partition_set_done_sensor(orders.key, "sales.orders", partitions_def=pdef,
                                       settings=app.settings)
    return orders, orders_report, sensor, dg.Definitions(assets=[orders, orders_report],
                                                          sensors=[sensor])


def _tick(sensor: Any, instance: Any, cursor: str | None) -> tuple[list[Any], str]:
    """One sensor tick; its materializations recorded as the sensor daemon would."""
    import dagster as dg

    result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
    for event in result.asset_events:
        instance.report_runless_asset_event(event)
    return list(result.asset_events), result.cursor


def test_exactly_the_done_partitions_are_requested(pn_app: Any) -> None:
    import dagster as dg

    _, report, sensor, defs = _defs(pn_app)
    instance = dg.DagsterInstance.ephemeral()
    first = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    assert first.total_requested == 0  # nothing upstream yet

    pub = pn_app.publisher
    pub.send_mark_set_done("sales", "orders", "datestamp=20110301/region=us")
    pub.send_mark_set_done("sales", "orders", "datestamp=20110302")          # coarser: both regions
    pub.send_mark_set_done("sales", "orders", "datestamp=20110214/region=eu")  # late, older day
    pub.announce_partitions("sales", "orders", ["datestamp=20110303/region=us"])  # not done
    events, cursor = _tick(sensor, instance, None)
    keys = sorted(str(e.partition) for e in events)
    assert keys == ["20110214|eu", "20110301|us", "20110302|eu", "20110302|us"]
    assert all(e.metadata["eventId"].value >= 1 for e in events)

    second = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)
    assert second.get_requested_partitions(report.key) == set(keys)

    again, cursor2 = _tick(sensor, instance, cursor)  # nothing new: nothing reported
    assert again == [] and cursor2 == cursor
    pub.send_mark_set_done("sales", "orders", "datestamp=20110305/region=eu")
    newer, _ = _tick(sensor, instance, cursor)
    assert [str(e.partition) for e in newer] == ["20110305|eu"]
    third = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=second.cursor)
    assert third.get_requested_partitions(report.key) == {"20110305|eu"}


def test_bad_cursor_is_named(pn_app: Any) -> None:
    import dagster as dg

    from partition_notify.core.errors import ConfigurationError

    _, _, sensor, _ = _defs(pn_app)
    with pytest.raises(ConfigurationError, match="'abc'"):
        sensor(dg.build_sensor_context(instance=dg.DagsterInstance.ephemeral(), cursor="abc"))



@pytest.mark.parametrize("cursor", ["\u00b2", "\uff11\uff12", "9" * 30, str(2**63)])
def test_a_cursor_that_is_no_event_id_is_named(pn_app: Any, cursor: str) -> None:
    """Unicode digits (``int()`` refuses "²", reads fullwidth digits as ASCII ones) and numbers
    past SQL BIGINT: a ConfigurationError naming the cursor, not a ValueError/OverflowError."""
    import dagster as dg

    from partition_notify.core.errors import ConfigurationError

    _, _, sensor, _ = _defs(pn_app)
    with pytest.raises(ConfigurationError, match="sensor cursor"):
        sensor(dg.build_sensor_context(instance=dg.DagsterInstance.ephemeral(), cursor=cursor))


def test_a_cursor_ahead_of_the_event_log_is_named_not_followed(pn_app: Any) -> None:
    """A cursor from another store (or one reset since) is past every event: ticking on
    from it would report nothing until the log got there, set-dones lost silently."""
    import dagster as dg

    from partition_notify.core.errors import ConfigurationError

    _, _, sensor, _ = _defs(pn_app)
    pn_app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110301")
    top = pn_app.store.log.max_event_id()
    instance = dg.DagsterInstance.ephemeral()
    _, cursor = _tick(sensor, instance, str(top))  # at the log's end: fine, nothing new
    assert cursor == str(top)
    with pytest.raises(ConfigurationError, match=f"ahead of the event log.*{top}"):
        sensor(dg.build_sensor_context(instance=instance, cursor=str(top + 5000)))

def test_keys_outside_the_partitions_definition_are_skipped_and_counted(pn_app: Any) -> None:
    """Issue 24: never write a partition the asset does not have into Dagster's history."""
    import logging

    import dagster as dg

    _, _, sensor, _ = _defs(pn_app)
    instance = dg.DagsterInstance.ephemeral()
    pub = pn_app.publisher
    pub.send_mark_set_done("sales", "orders", "datestamp=20110131/region=us")   # before start
    pub.send_mark_set_done("sales", "orders", "datestamp=2011-03-01/region=us")  # other format
    pub.send_mark_set_done("sales", "orders", "datestamp=20110301/region=apac")  # not a region
    pub.send_mark_set_done("sales", "orders", "datestamp=20110301/region=eu")    # valid
    pub.send_mark_set_done("sales", "orders", "datestamp=20110311")              # after the end
    context = dg.build_sensor_context(instance=instance)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]  # the tick's own log
    context.log.addHandler(handler)
    result = sensor(context)
    for event in result.asset_events:
        instance.report_runless_asset_event(event)
    assert [str(e.partition) for e in result.asset_events] == ["20110301|eu"]
    skipped = [r.getMessage() for r in records if "not in the asset" in r.getMessage()]
    assert len(skipped) == 1 and "skipped 5 partition key(s)" in skipped[0], skipped
    assert "20110131|us" in skipped[0] and "20110301|apac" in skipped[0]
    materialized = instance.get_materialized_partitions(dg.AssetKey("sales_orders"))
    assert materialized == {"20110301|eu"}


def test_sensor_can_start_running(pn_app: Any) -> None:
    import dagster as dg
    from partition_notify.integrations.dagster.sensors import (
        DEFAULT_INTERVAL_SECONDS,
        partition_set_done_sensor,
    )

    stopped = partition_set_done_sensor("sales_orders", "sales.orders", settings=pn_app.settings)
    running = partition_set_done_sensor("sales_orders", "sales.orders", settings=pn_app.settings,
                                        default_status=dg.DefaultSensorStatus.RUNNING)
    assert stopped.name == "partition_notify_sales_orders"
    assert stopped.default_status == dg.DefaultSensorStatus.STOPPED
    assert running.default_status == dg.DefaultSensorStatus.RUNNING
    assert stopped.minimum_interval_seconds == DEFAULT_INTERVAL_SECONDS == 30


def test_a_set_done_before_the_automation_sensors_first_evaluation_starts_no_run(
    pn_app: Any,
) -> None:
    """What docs/schedulers.md says about the first tick: start the automation sensor first."""
    import dagster as dg

    _, report, sensor, defs = _defs(pn_app)
    instance = dg.DagsterInstance.ephemeral()
    pn_app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110301/region=us")
    _tick(sensor, instance, None)  # recorded before the automation sensor ever evaluated
    first = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    second = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)
    assert first.get_requested_partitions(report.key) == set()
    assert second.get_requested_partitions(report.key) == set()


def test_a_table_not_registered_yet_is_a_skipped_tick_then_followed(
        dagster_available: None, tmp_path: Any) -> None:
    """Deployed before the producer's first run: the tick is skipped saying so (it failed
    with UnknownTableError), the cursor stays, and the table's set-dones come after."""
    import dagster as dg
    from partition_notify.integrations.dagster.sensors import partition_set_done_sensor

    from partition_notify.app import build_app

    with build_app(store_url=f"sqlite:///{tmp_path}/pn.db", transport_url="embedded://") as app:
        sensor = partition_set_done_sensor("sales_orders", "sales.orders", settings=app.settings)
        instance = dg.DagsterInstance.ephemeral()
        result = sensor(dg.build_sensor_context(instance=instance, cursor=None))
        assert "sales.orders is not registered" in str(result.skip_reason)
        assert result.cursor is None
        app.publisher.register_table("sales", "orders", ["datestamp", "region"])
        app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110228")
        events, _ = _tick(sensor, instance, None)
        assert [e.partition for e in events] == [None]  # unpartitioned asset: one event
        assert events[0].metadata["spec"].value == "datestamp=20110228"
