"""SNAPSHOT datasets with Spark: write a complete new version, read the current one.

The bookkeeping (versions, pointer, retention) is
:class:`partition_notify.revisions.datasets.SnapshotDatasets` (``app.datasets``); this module
writes a version's files with Spark, deletes them through the Hadoop
FileSystem (:class:`partition_notify.writers.hadoop.HadoopFs`) and announces new versions.

A failed run leaves the pointer alone and removes its partial files; a
killed run's files are removed by retention (:func:`expire_versions`, and
``serve``'s expiry job) once its transaction has expired.

When a version becomes current it is announced on the dataset's
notification table (partition key ``version``): an add-partition message
for ``version=<n>`` (``replace=True``, ``revision=n``, its location) and a
mark-set-done for the same partition, so schedulers can either react to new
partitions or ``wait_for_set_done`` on a version.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

from partition_notify.revisions.datasets import (
    COMPLETE,
    DEFAULT_MIN_VERSIONS,
    FAILED,
    VERSION_KEY,
    WRITING,
    FileSystem,
    LocalFileSystem,
    SnapshotDatasets,
    VersionInfo,
    version_path,
)
from partition_notify.revisions.manager import RevisionManager
from partition_notify.revisions.model import WriteTransaction
from partition_notify.writers.hadoop import HadoopFs
from partition_notify.writers.spark_errors import spark_failures, writable_location

from partition_notify.core.errors import (
    ConfigurationError,
    ConflictError,
    PartitionNotifyError,
    ValidationError,
)

if TYPE_CHECKING:
    from partition_notify.publisher import Publisher
    from partition_notify.writers.parts import AppParts
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

#: Keep-alive of a run's write transaction; a heartbeat renews it while Spark writes.
DEFAULT_RUN_KEEP_ALIVE_SECONDS = 3600.0


class SparkFileSystem:
    """Deletes through the Hadoop FileSystem of a Spark session: HDFS, S3A, GCS, local."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def delete(self, path: str) -> bool:
        fs = HadoopFs(self.spark, path)
        return fs.exists(path) and fs.delete(path)


def file_system(spark: SparkSession | None = None, fs: FileSystem | None = None) -> FileSystem:
    if fs is not None:
        return fs
    return SparkFileSystem(spark) if spark is not None else LocalFileSystem()


def _wired(source: AppParts | SnapshotDatasets,
           publisher: Publisher | None) -> tuple[SnapshotDatasets, Publisher | None]:
    """The datasets and publisher of an App (or of the datasets alone: no announcements)."""
    if isinstance(source, SnapshotDatasets):
        return source, publisher
    return source.datasets, publisher if publisher is not None else source.publisher


class SnapshotDataset:
    """A full-refresh dataset: ``write(df)`` publishes a complete new version atomically.

    Build it with :meth:`define` (writers: records location and retention)
    or :meth:`open` (readers: uses what is stored), from an App (which also
    announces new versions) or from ``app.datasets``.
    """

    def __init__(self, datasets: SnapshotDatasets, name: str, location: str, *,
                 publisher: Publisher | None = None,
                 keep_alive_seconds: float = DEFAULT_RUN_KEEP_ALIVE_SECONDS,
                 fs: FileSystem | None = None) -> None:
        self.datasets = datasets
        #: Where partial files are removed; default: Hadoop FS of the writing session.
        self.fs = fs
        self.name = name
        self.location = location.rstrip("/")
        self.publisher = publisher
        self.keep_alive_seconds = keep_alive_seconds

    @property
    def revisions(self) -> RevisionManager:
        return self.datasets.revisions

    @classmethod
    def define(cls, source: AppParts | SnapshotDatasets, name: str, location: str, *,
               ttl_seconds: float | None = None, min_versions: int = DEFAULT_MIN_VERSIONS,
               publisher: Publisher | None = None,
               keep_alive_seconds: float = DEFAULT_RUN_KEEP_ALIVE_SECONDS) -> SnapshotDataset:
        """Create the dataset, or update its retention; its location cannot change."""
        datasets, publisher = _wired(source, publisher)
        name, location = datasets.define(name, location, ttl_seconds=ttl_seconds,
                                         min_versions=min_versions)
        return cls(datasets, name, location, publisher=publisher,
                   keep_alive_seconds=keep_alive_seconds)

    @classmethod
    def open(cls, source: AppParts | SnapshotDatasets, name: str, *,
             publisher: Publisher | None = None,
             keep_alive_seconds: float = DEFAULT_RUN_KEEP_ALIVE_SECONDS) -> SnapshotDataset:
        """The dataset as defined in the store (:class:`NotFoundError` if it is not)."""
        datasets, publisher = _wired(source, publisher)
        return cls(datasets, name, datasets.location(name), publisher=publisher,
                   keep_alive_seconds=keep_alive_seconds)

    def register(self, retention_seconds: int | None = None) -> None:
        """Register the notification table ``<db>.<table>`` with partition key ``version``."""
        if self.publisher is None:
            raise ConfigurationError(
                f"SNAPSHOT dataset {self.name}: register() needs the dataset built with "
                "publisher=..."
            )
        db, table = self._notify_table()
        self.publisher.register_table(
            db, table, [VERSION_KEY], location=self.location, retention_seconds=retention_seconds
        )

    # -- writing --------------------------------------------------------------
    def write(self, df: DataFrame) -> VersionInfo:
        """Write ``df`` as a complete new version and make it current; all or nothing."""
        if getattr(df, "sparkSession", None) is None:  # before a run (a failed version) begins
            raise ValidationError(f"write() takes a Spark DataFrame, got {type(df).__name__}")
        with self.begin() as run:
            run.write(df)
        assert run.result is not None
        return run.result

    @contextmanager
    def begin(self) -> Iterator[VersionRun]:
        """``with ds.begin() as run: run.write(df)``: commits on success, aborts on error."""
        run = self.start()
        try:
            yield run
        except BaseException as exc:
            run.abort(exc)
            raise
        if run.result is None and run.state == WRITING:
            run.commit()

    def start(self) -> VersionRun:
        """Begin a run explicitly; finish it with ``commit()`` or ``abort()``."""
        tx, path = self.datasets.start(self.name, self.location, self.keep_alive_seconds)
        return VersionRun(self, tx, path)

    def version_path(self, version: int) -> str:
        return version_path(self.location, version)

    def notify(self, version: int) -> None:
        """Announce ``version`` as new: add-partition ``version=<n>`` and its set-done."""
        if self.publisher is None:
            return
        db, table = self._notify_table()
        spec = {VERSION_KEY: str(version)}
        self.publisher.announce_partitions(db, table, [spec],
                                           locations=[self.version_path(version)],
                                           revision=version, replace=True)
        self.publisher.send_mark_set_done(db, table, spec, revision=version)

    # -- reading --------------------------------------------------------------
    def current_version(self) -> int | None:
        return self.datasets.current_version(self.name)

    def read(self, spark: SparkSession, version: int | None = None) -> DataFrame:
        """The current version (or ``version``, if still kept) as a DataFrame."""
        return spark.read.parquet(self.resolve(version)[1])

    def resolve(self, version: int | None = None) -> tuple[int, str]:
        """(version, path) a reader should read: the pointer, resolved once."""
        return self.datasets.resolve(self.name, version)

    def versions(self) -> list[VersionInfo]:
        return self.datasets.versions(self.name)

    def _notify_table(self) -> tuple[str, str]:
        if self.publisher is None:
            raise ConfigurationError(f"SNAPSHOT dataset {self.name} has no publisher to notify")
        db, sep, table = self.name.partition(".")
        if not sep or not db or not table:
            raise ConfigurationError(
                f"SNAPSHOT dataset {self.name!r} must be named <db>.<table> to be announced"
            )
        return db, table


class VersionRun:
    """One run of a dataset: a write transaction and the directory it fills."""

    def __init__(self, dataset: SnapshotDataset, tx: WriteTransaction, path: str) -> None:
        self.dataset, self.tx, self.path = dataset, tx, path
        self.version = tx.revision
        self.state = WRITING
        self.result: VersionInfo | None = None
        self._spark: SparkSession | None = None

    def write(self, df: DataFrame) -> None:
        """Write the whole new version (natively, with Spark), keeping the transaction alive."""
        if self.state != WRITING:
            raise ConflictError(f"run {self.version} of {self.dataset.name} is {self.state}")
        self._spark = df.sparkSession
        self._check_writable(self._spark)
        what = f"version {self.version} of SNAPSHOT dataset {self.dataset.name} at {self.path}"
        with self.dataset.revisions.kept_alive(self.tx) as keeper, spark_failures(what):
            df.write.mode("errorifexists").parquet(self.path)
        if keeper.error is not None:
            raise keeper.error

    def _check_writable(self, spark: SparkSession) -> None:
        """A location this process may not write is named before Spark runs the job: a
        task's "Mkdirs failed" under Spark's stage-failure text, the location's
        expectation unsaid. A probe file next to the versions (``version=N`` itself
        must not exist: Spark writes it with ``errorifexists``)."""
        location = self.dataset.location
        probe = f"{location.rstrip('/')}/_pn_probe-{self.version}"
        with writable_location(location, f"SNAPSHOT dataset {self.dataset.name}"):
            fs = HadoopFs(spark, location)
            fs.create(probe, b"", exclusive=False)
            fs.delete(probe, recursive=False)

    def commit(self) -> VersionInfo:
        """Make this version current (or complete a late run); announce it when current."""
        try:
            info, refusal = self.dataset.datasets.commit(self.dataset.name, self.tx)
        except ConflictError:
            self.state = FAILED
            raise
        if refusal is not None:
            self.state = FAILED
            self._remove_files()
            raise refusal
        self.state = COMPLETE
        if info.current:
            info = self._announce(info)
        self.result = info
        return info

    def abort(self, error: BaseException | str | None = None) -> None:
        """Give up: remove the partial files, abort the transaction, pointer untouched."""
        if self.state != WRITING:
            return
        self.state = FAILED
        if error is None or isinstance(error, str):
            text = error
        else:
            text = f"{type(error).__name__}: {error}"
        problems: list[str] = []
        try:
            self._remove_files()
        except Exception as exc:  # reported; retention retries
            problems.append(f"removing {self.path} failed: {exc!r}")
        try:
            self.dataset.datasets.abort(self.dataset.name, self.tx, text or "aborted")
        except PartitionNotifyError as exc:
            problems.append(f"recording the abort failed: {exc}")
        for p in problems:
            log.error("run %d of SNAPSHOT dataset %s: %s", self.version, self.dataset.name, p)
            if isinstance(error, BaseException):
                error.add_note(p)

    def _remove_files(self) -> None:
        file_system(self._spark, self.dataset.fs).delete(self.path)

    def _announce(self, info: VersionInfo) -> VersionInfo:
        try:
            self.dataset.notify(self.version)
        except PartitionNotifyError as exc:
            # The version is current either way; a PublishError means it is
            # logged and the relay delivers it; anything else can be retried
            # with notify(version).
            log.warning("version %d of %s is current but its announcement failed: %s",
                        self.version, self.dataset.name, exc)
            return replace(info, notify_error=str(exc))
        return info


def expire_versions(datasets: SnapshotDatasets, *, spark: SparkSession | None = None,
                    fs: FileSystem | None = None,
                    dataset: str | None = None) -> list[tuple[str, int]]:
    """:meth:`SnapshotDatasets.expire`, deleting through ``spark``'s Hadoop FileSystem
    (needed for hdfs://, s3a://, ...) or, without one, local paths only."""
    return datasets.expire(file_system(spark, fs), dataset)


__all__ = [
    "SnapshotDataset",
    "SparkFileSystem",
    "VersionRun",
    "expire_versions",
    "file_system",
]
