"""Exactly once into Dagster: a set-done read again from an older cursor reports nothing new.

Real Dagster (``DagsterInstance.ephemeral``, the automation-condition evaluator),
real SQLite store. The redelivery is what a restored instance or a reset
sensor cursor does: the tick reads the same set-dones again from the log.
"""

from __future__ import annotations

from typing import Any

from tests.integrations.test_dagster import _defs, _tick, pn_app  # noqa: F401  (fixture)


def test_a_replayed_tick_reports_no_second_materialization_and_requests_no_second_run(
        pn_app: Any) -> None:  # noqa: F811
    import dagster as dg

    _, report, sensor, defs = _defs(pn_app)
    instance = dg.DagsterInstance.ephemeral()
    first = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    done = pn_app.publisher.send_mark_set_done("sales", "orders",
                                               "datestamp=20110301/region=us")
    events, cursor = _tick(sensor, instance, None)
    assert [str(e.partition) for e in events] == ["20110301|us"]
    assert events[0].metadata["key"].value.startswith(f"sales.orders:{done.event_id}:0:")
    second = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)
    assert second.get_requested_partitions(report.key) == {"20110301|us"}

    # The cursor is lost (instance restored, sensor reset): the log is read again.
    replayed, cursor2 = _tick(sensor, instance, None)
    assert replayed == [] and cursor2 == cursor
    third = dg.evaluate_automation_conditions(defs=defs, instance=instance,
                                              cursor=second.cursor)
    assert third.total_requested == 0

    # A new set-done of the same partition (a restatement) is reported, as before.
    pn_app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110301/region=us")
    newer, _ = _tick(sensor, instance, None)
    assert [str(e.partition) for e in newer] == ["20110301|us"]
