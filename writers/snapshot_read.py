"""Repeatable reads of a partitioned table as of a revision snapshot.

A snapshot names, per family, the highest revision a reader may see and the
aborted ones below it. Every transactional write records the data files it
added under its revision (``pn_revision_files``), and an overwrite records
the partitions it replaced and moves their old files aside instead of
deleting them. A snapshot read lists exactly the files of the committed
revisions it covers, minus those a covered overwrite replaced, and hands
that list to Spark's own reader: reading the same snapshot twice gives the
same rows, whatever writers append or overwrite in between.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from partition_notify.revisions import DEFAULT_FAMILY, RevisionManager, Snapshot
from partition_notify.revisions.files import RevisionFiles
from partition_notify.writers.hadoop import HadoopFs

from partition_notify.contract import names
from partition_notify.core.errors import ConfigurationError, NotFoundError, ValidationError

if TYPE_CHECKING:
    from partition_notify.writers.parts import AppParts
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class SnapshotRead:
    """What :func:`read_snapshot` read: the rows, the snapshot, the files behind them.

    Keep :attr:`snapshot` (``snapshot.to_dict()`` is JSON) to repeat the read
    later. DataFrame attributes are forwarded to :attr:`frame`, so code that
    used the result as a DataFrame keeps working.
    """

    frame: DataFrame
    snapshot: Snapshot
    #: Every data file read, fully qualified.
    files: tuple[str, ...]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy/pickle probing, before the fields exist
            raise AttributeError(name)
        return getattr(self.frame, name)


def read_snapshot(spark: SparkSession, app: AppParts, db: str, table: str, *,
                  snapshot: Snapshot | Mapping[str, Any] | None = None,
                  family: str = DEFAULT_FAMILY,
                  format: str = "parquet", revisions: RevisionManager | None = None,
                  **options: Any) -> SnapshotRead:
    """The rows of ``db.table`` that ``snapshot`` covers (default: the latest snapshot;
    a snapshot's ``to_dict()``, as handed to a job, is taken too).

    Only data written by transactional writes is tracked per revision: a
    snapshot that covers no file raises :class:`NotFoundError`; one whose files
    ``serve`` deleted (PN_RETIRED_FILE_RETENTION_SECONDS after the overwrite that
    replaced them) raises :class:`SnapshotFilesRemovedError`. ``revisions``
    defaults to ``app.revisions``.
    """
    info = app.store.catalog.get_table(names.db_name(db), names.table_name(table))
    manager = revisions or app.revisions
    if snapshot is None:
        snapshot = manager.create_snapshot(info.qualified)
    snapshot = _snapshot_of(snapshot, info.qualified)
    if not info.location:
        raise ConfigurationError(f"{info.qualified} is registered without a location")
    root = HadoopFs(spark, info.location).root
    files = tuple(f"{root}/{p}" for p in RevisionFiles(manager).visible(info.qualified,
                                                                         snapshot, family))
    if not files:
        raise NotFoundError(
            f"snapshot {snapshot.revision(family)} of {info.qualified} covers no data file"
        )
    from pyspark.sql.types import StringType, StructField, StructType

    # Partition values are strings in our model: give them as such, or Spark's
    # type inference would turn datestamp=0228 into the integer 228.
    data = spark.read.format(format).options(**options).load(files[0]).schema
    keys = [StructField(k, StringType()) for k in info.partition_keys]
    schema = StructType([f for f in data.fields if f.name not in info.partition_keys] + keys)
    # Partition columns come from the directory names below the table root
    # (for files an overwrite moved aside, below their retired directory).
    reader = (spark.read.format(format).options(**options).schema(schema)
              .option("basePath", root))
    with _listing_tasks(spark, spark.sparkContext.defaultParallelism):
        frame = reader.load(list(files))
    return SnapshotRead(frame, snapshot, files)


def _snapshot_of(snapshot: object, table: str) -> Snapshot:
    """``snapshot`` (or its ``to_dict()``, as handed to a job) if it is one of ``table``."""
    if isinstance(snapshot, Mapping):
        snapshot = Snapshot.from_dict(snapshot)
    if not isinstance(snapshot, Snapshot):
        raise ValidationError(f"snapshot must be a Snapshot or its to_dict(), got "
                              f"{type(snapshot).__name__} {snapshot!r:.80}")
    if snapshot.table != table:
        # Revision numbers are per table: another table's would cover other writes.
        raise ValidationError(f"the snapshot is of {snapshot.table}, not {table}")
    return snapshot


@contextmanager
def _listing_tasks(spark: SparkSession, tasks: int) -> Iterator[None]:
    """Let Spark list the named files with at most ``tasks`` tasks while a read is resolved.

    Spark lists more than a few root paths with a job of one task per path
    (up to 10,000): for a snapshot's files, one task per *file*, which cost
    100 s for 2,000 files on a local[2] session. The file index is built
    eagerly by ``load``, so the setting is restored as soon as it returns.
    """
    key = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
    before = spark.conf.get(key, None)
    spark.conf.set(key, str(max(1, tasks)))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


__all__ = ["SnapshotRead", "read_snapshot"]
