"""Deleting retired data files where ``serve`` cannot: through the Hadoop FileSystem.

An overwrite moves the files it replaces to ``<partition>/_pn_retired/<write_id>/``
so older snapshots still read them (revisions/vacuum.py). ``serve`` deletes them
past their retention in local locations only: it has no Hadoop FileSystem, and a
table on ``hdfs://``, ``s3a://`` or ``abfss://`` is reached through the one the
Spark job's configuration names (credentials included). So a Spark job deletes
them, as Delta's ``VACUUM`` is run::

    from partition_notify.writers import vacuum_retired
    vacuum_retired(app, "sales", "orders", spark=spark)

The same rows, checks and bookkeeping as ``serve``'s pass (revisions/vacuum.py):
only files the rows name, each in the directory it must be in below the table's
location, never a directory, a failed deletion retried on later runs a bounded
number of times; a snapshot pinned at a revision whose files went then fails
naming the retention instead of reading fewer rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from partition_notify.publisher import Publisher
from partition_notify.revisions.retention import remove_aborted_files
from partition_notify.revisions.vacuum import FileRemover, Outcome, TableFiles, remove_retired
from partition_notify.store.uow import UnitOfWork
from partition_notify.writers.hadoop import HadoopFs

from partition_notify.core.errors import ConfigurationError
from partition_notify.core.limits import RETIRED_FILE_RETENTION_SECONDS

if TYPE_CHECKING:
    from partition_notify.writers.writer import HasPublisher
    from pyspark.sql import SparkSession

#: Overwritten partitions dealt with per store transaction.
BATCH_SIZE = 100


@dataclass
class HadoopFiles:
    """A table location on any Hadoop FileSystem. A directory on the way that is a
    link (where the FileSystem reports links; HDFS has them off by default, object
    stores have none) is refused, as :func:`revisions.vacuum.remove_in` refuses one."""

    fs: HadoopFs
    #: Directories already found to be directories in this run: each is one round trip,
    #: and a partition's retired files all lie below the same few.
    _dirs: set[tuple[str, ...]] = field(default_factory=set)

    def _path(self, parts: list[str]) -> str:
        return "/".join([self.fs.root, *parts])

    def remove(self, dirs: list[str], name: str) -> Outcome:
        for depth in range(1, len(dirs) + 1):
            if tuple(dirs[:depth]) in self._dirs:
                continue
            kind = self.fs.kind(self._path(dirs[:depth]))
            if kind is None:
                return "gone"
            if kind != "dir":
                raise ValueError(f"{dirs[depth - 1]!r} below the table location is not a "
                                 "directory (a link is not followed)")
            self._dirs.add(tuple(dirs[:depth]))
        path = self._path([*dirs, name])
        kind = self.fs.kind(path)
        if kind is None:
            return "gone"
        if kind == "dir":
            raise ValueError(f"{name!r} is a directory; only files are deleted")
        return "removed" if self.fs.delete(path, recursive=False) else "gone"

    def drop_empty(self, dirs: list[str]) -> None:
        path = self._path(dirs)
        if self.fs.kind(path) != "dir":
            return
        try:  # non-recursive: a directory that is not empty raises, and stays
            self.fs.delete(path, recursive=False)
        except Exception:  # any FileSystem's "not empty" error
            return
        self._dirs.discard(tuple(dirs))


def vacuum_retired(target: HasPublisher | Publisher, db: str, table: str, *,
                   spark: SparkSession | None = None,
                   retention_seconds: float = RETIRED_FILE_RETENTION_SECONDS) -> int:
    """Delete the files overwrites of ``db.table`` retired more than
    ``retention_seconds`` ago (default: ``PN_RETIRED_FILE_RETENTION_SECONDS``'s), and
    the files of its write transactions aborted that long ago, through the table
    location's Hadoop FileSystem; returns how many were deleted."""
    if not retention_seconds > 0:
        raise ConfigurationError(
            f"retention_seconds must be > 0 (snapshots read retired files until then), "
            f"got {retention_seconds!r}")
    publisher = target if isinstance(target, Publisher) else target.publisher
    info = publisher.table(db, table)
    if not info.location:
        raise ConfigurationError(f"{info.qualified} is registered without a location: "
                                 "it has no files to delete")
    if spark is None:
        from partition_notify.writers.target import active_session

        spark = active_session()
    files: TableFiles = HadoopFiles(HadoopFs(spark, info.location))
    remover = FileRemover(lambda name: files if name == info.qualified else None)
    store = publisher.store
    now = store.clock()
    write_uow = partial(UnitOfWork, store.engine, write=True)
    remove_retired(write_uow, remover, now, now - retention_seconds, batch_size=BATCH_SIZE)
    # Aborted writes' files too: no snapshot reads them; serve purges their rows
    # later (PN_REVISION_ABORT_RETENTION_SECONDS) and cannot delete them here.
    remove_aborted_files(write_uow, remover, info.qualified, now - retention_seconds, now,
                         batch_size=BATCH_SIZE)
    return remover.removed


__all__ = ["HadoopFiles", "vacuum_retired"]
