"""A partition-aware DAG the push-sink test feeds: one run per asset partition."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG, Asset, PartitionedAssetTimetable, task

SALES_ORDERS = Asset("sales_orders")

with DAG(
    "pn_orders_by_partition",
    schedule=PartitionedAssetTimetable(assets=SALES_ORDERS),
    start_date=datetime(2011, 2, 1, tzinfo=UTC),
    catchup=False,
):

    @task
    def report() -> None: ...

    report()

#: A second table's asset: the poison tests push one table while the other is refused.
SALES_RETURNS = Asset("sales_returns")

with DAG(
    "pn_returns_by_partition",
    schedule=PartitionedAssetTimetable(assets=SALES_RETURNS),
    start_date=datetime(2011, 2, 1, tzinfo=UTC),
    catchup=False,
):

    @task
    def count_returns() -> None: ...

    count_returns()
