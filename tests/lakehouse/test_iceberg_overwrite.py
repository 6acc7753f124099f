"""pyiceberg's dynamic partition overwrite: exactly the partitions it replaced are
announced again, at the overwrite's revision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from partition_notify.writers.lakehouse.follower import Follower
from partition_notify.writers.lakehouse.iceberg import Catalogs, catalog_properties
from partition_notify.writers.lakehouse.store import LakehouseTables
from pyiceberg.catalog import Catalog, load_catalog

from partition_notify.app import App
from tests.lakehouse.helpers import Logged, catalog_env, logged

TABLE = "sales.orders"
KEYS = ["datestamp", "region"]
SET_DONE = "partition-notify.mark-set-done"


def _identity_table(catalog: Catalog) -> Any:
    """identity(datestamp), identity(region): what dynamic overwrite supports."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    catalog.create_namespace_if_not_exists("sales")
    schema = Schema(NestedField(1, "datestamp", StringType(), required=False),
                    NestedField(2, "region", StringType(), required=False),
                    NestedField(3, "v", LongType(), required=False))
    spec = PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "datestamp"),
                         PartitionField(2, 1001, IdentityTransform(), "region"))
    return catalog.create_table(TABLE, schema, partition_spec=spec)


def _rows(table: Any, *data: tuple[str, str, int]) -> pa.Table:
    return pa.Table.from_pylist([{"datestamp": d, "region": r, "v": v} for d, r, v in data],
                                schema=table.schema().as_arrow())


def test_dynamic_partition_overwrite_reannounces_exactly_the_replaced_partitions(
        app: App, tmp_path: Path) -> None:
    (tmp_path / "wh").mkdir()
    env = catalog_env("lake", f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh")
    table = _identity_table(load_catalog("lake", **catalog_properties("lake", env)))
    info = app.publisher.register_table("sales", "orders", KEYS)
    LakehouseTables(app.store).register(info, "iceberg", catalog="lake")
    follower = Follower(app.publisher, "iceberg", catalogs=Catalogs(env))
    follower.run_once()
    table.append(_rows(table, ("20260101", "us", 1), ("20260101", "eu", 2),
                       ("20260102", "us", 3)))
    follower.run_once()
    mark = app.store.log.max_event_id()

    # Replaces 20260101/us, leaves 20260101/eu and 20260102/us, creates 20260103/us.
    table.dynamic_partition_overwrite(
        _rows(table, ("20260101", "us", 10), ("20260103", "us", 11)),
        snapshot_properties={SET_DONE: "datestamp=20260101"})
    overwrite = table.current_snapshot().snapshot_id
    stats = follower.run_once()

    assert stats.errors == 0
    got = logged(app, TABLE, after=mark)
    assert set(got[:2]) == {Logged("add", "datestamp=20260101/region=us", overwrite),
                            Logged("add", "datestamp=20260103/region=us", overwrite)}
    assert got[2:] == [Logged("done", "datestamp=20260101", overwrite)]
