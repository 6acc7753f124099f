"""serve's periodic jobs read only the tables they work on, never the whole catalog.

With 10,000 registered tables, the rules evaluator, the deadline checker, the
Spark commit pick-up and the event-log horizon each loaded every table as ORM
objects on every tick. They hold the GIL while doing it, so ``/ui/tables`` in
the same process waited up to a second for them one render in ten (PostgreSQL,
bench/ui_render.py: p50 42 ms, p95 555 ms, with 25 ms of the request's own CPU).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from partition_notify.writers.commit_spool import spool_dirs
from sqlalchemy import event

from partition_notify.app import App, build_app
from partition_notify.serve.housekeeping import event_log_horizon

TABLES = 40


@pytest.fixture
def app(store_url: str, tmp_path: Path) -> Iterator[App]:
    a = build_app(store_url=store_url, transport_url="embedded://")
    pub = a.publisher
    for i in range(TABLES):
        pub.register_table("bulk", f"t{i:03d}", ["ds"])
    pub.register_table("sales", "orders", ["datestamp", "region"],
                       location=(tmp_path / "orders").as_uri())
    pub.register_table("sales", "returns", ["datestamp", "region"])
    a.rules.add("sales.orders", name="regions", kind="all-of",
                params={"key": "region", "values": ["us", "eu"], "by": ["datestamp"]})
    a.deadlines.add("sales", "returns", name="daily", spec_template="datestamp={{ ds_nodash }}",
                    cron="0 6 * * *", deadline="+2h")
    yield a
    a.close()


def whole_catalog_reads(app: App, work: Callable[[], object]) -> list[str]:
    """The statements ``work`` ran that read every row of pn_tables."""
    statements: list[str] = []

    def grab(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        statements.append(statement)

    event.listen(app.store.engine, "before_cursor_execute", grab)
    try:
        work()
    finally:
        event.remove(app.store.engine, "before_cursor_execute", grab)
    # Rows of every table: the table's columns, no WHERE (one aggregate row is fine).
    return [s for s in statements if "FROM pn_tables" in s
            and "pn_tables.id" in s.split("FROM pn_tables", 1)[0]
            and "WHERE" not in s.split("FROM pn_tables", 1)[1]]


def test_rules_evaluator_reads_only_its_rules_tables(app: App) -> None:
    evaluator = app.rules.evaluator()
    app.publisher.announce_partitions("sales", "orders", ["datestamp=20260101/region=us"])
    assert whole_catalog_reads(app, evaluator.run_once) == []
    assert whole_catalog_reads(app, evaluator.next_due) == []


def test_deadline_checker_reads_only_tables_with_expectations(app: App) -> None:
    checker = app.deadlines.checker()
    assert whole_catalog_reads(app, checker.check) == []


def test_spark_pickup_lists_only_tables_with_a_location(app: App) -> None:
    found: list[Any] = []
    assert whole_catalog_reads(app, lambda: found.extend(spool_dirs(app.publisher))) == []
    assert [d.table.qualified for d in found if d.table is not None] == ["sales.orders"]


def test_event_log_horizon_reads_the_longest_retention_not_every_table(app: App) -> None:
    app.store.catalog.set_retention("bulk", "t007", 90 * 86400)
    horizon: list[float] = []
    assert whole_catalog_reads(app, lambda: horizon.append(event_log_horizon(app))) == []
    assert horizon == [max(app.settings.event_log_retention_seconds, 90 * 86400,
                           app.settings.deadline_lookback_seconds)]
