"""Repeatable reads of a partitioned table as of a revision snapshot.

A snapshot names, per family, the highest revision a reader may see and the
aborted ones below it; the partitions it covers are exactly those announced
by committed revisions it includes. Reading the same snapshot twice gives the
same rows, whatever writers commit in between.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from partition_notify.contract import names
from partition_notify.errors import NotFoundError
from store import Store
from store.revisions import DEFAULT_FAMILY, RevisionManager, Snapshot, snapshot_partitions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def read_snapshot(spark: SparkSession, store: Store, db: str, table: str, *,
                  snapshot: Snapshot | None = None, family: str = DEFAULT_FAMILY,
                  format: str = "parquet", **options: Any) -> DataFrame:
    """A DataFrame of ``db.table`` holding only the partitions ``snapshot`` covers.

    Without ``snapshot`` the latest one is taken (and can be read from the
    result's ``snapshot`` attribute to repeat the read later).
    """
    info = store.get_table(names.db_name(db), names.table_name(table))
    if snapshot is None:
        snapshot = RevisionManager(store).create_snapshot(info.qualified)
    locations = [p.location for p in snapshot_partitions(store, info, snapshot, family)
                 if p.location]
    from pyspark.sql.types import StringType, StructField, StructType

    if not locations:
        raise NotFoundError(
            f"snapshot {snapshot.revision(family)} of {info.qualified} covers no partition"
        )
    # Partition values are strings in our model: give them as such, or Spark's
    # type inference would turn datestamp=0228 into the integer 228.
    data = spark.read.format(format).options(**options).load(locations[0]).schema
    keys = [StructField(k, StringType()) for k in info.partition_keys]
    schema = StructType([f for f in data.fields if f.name not in info.partition_keys] + keys)
    reader = spark.read.format(format).options(**options).schema(schema)
    if info.location:
        # Partition columns come from the directory names below the table root.
        reader = reader.option("basePath", info.location)
    frame = reader.load(locations)
    frame.snapshot = snapshot  # type: ignore[attr-defined]
    return frame
