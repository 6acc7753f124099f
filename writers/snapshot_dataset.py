"""SNAPSHOT datasets: full-refresh datasets read as one consistent version.

Every run writes a *complete* new version to ``<location>/version=<n>/``
where ``n`` is the run's revision from the :class:`RevisionManager` (the
revision is the version). Only when the Spark write has
succeeded does the run commit, and the commit flips the current-version
pointer in the store in the same database transaction. Readers resolve the
pointer first and then read that one directory, so they see the old version
or the new one, never a mix, and rows deleted at the source are gone from
the new version. A failed run leaves the pointer alone and removes its
partial files; a killed run's files are removed by :func:`expire_versions`
once its transaction has expired.

Retention trade-off: a TTL alone would delete everything if the
runs stopped, so the newest ``min_versions`` complete versions (at least
one, always including the current one) are kept whatever their age; older
ones go once they have been superseded for ``ttl_seconds`` (or at once when
no TTL is set). The TTL counts from when a version stopped being current,
so it is the grace period of readers still on the previous version: set it
longer than the longest read. :func:`expire_versions` enforces this from a
scheduled job (:func:`schedule_expiry`).

When a version becomes current it is announced on the dataset's
notification table (partition key ``version``): an add-partition message
for ``version=<n>`` (``replace=True``, ``revision=n``, its location) and a
mark-set-done for the same partition, so schedulers can either react to new
partitions or ``wait_for_set_done`` on a version.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from partition_notify.errors import (
    ConfigurationError,
    ConflictError,
    NotFoundError,
    PartitionNotifyError,
    ValidationError,
)
from revisions import DEFAULT_FAMILY, RevisionManager, WriteTransaction
from revisions.model import table_name
from revisions.repositories import RevisionUnitOfWork
from revisions.schema import SnapshotDatasetRow, SnapshotVersionRow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from publisher import Publisher
    from store import Store

log = logging.getLogger(__name__)

#: The one column family of a dataset's write transactions.
FAMILY = DEFAULT_FAMILY
#: Partition key of the notification table of a dataset.
VERSION_KEY = "version"

WRITING, COMPLETE, FAILED, EXPIRING = "writing", "complete", "failed", "expiring"


class FileSystem(Protocol):
    def delete(self, path: str) -> bool:
        """Remove ``path`` recursively; False if it did not exist."""


class HadoopFileSystem:
    """Deletes through Hadoop's FileSystem API of a Spark session: HDFS, S3A, GCS, local."""

    def __init__(self, spark: SparkSession) -> None:
        self._jvm: Any = spark._jvm
        self._conf: Any = spark._jsc.hadoopConfiguration()

    def delete(self, path: str) -> bool:
        p = self._jvm.org.apache.hadoop.fs.Path(path)
        fs = p.getFileSystem(self._conf)
        if not fs.exists(p):
            return False
        return bool(fs.delete(p, True))


class LocalFileSystem:
    """Deletes local paths (``/path`` or ``file:/path``) without a Spark session."""

    def delete(self, path: str) -> bool:
        parts = urlsplit(path)
        if parts.scheme not in ("", "file"):
            raise ConfigurationError(
                f"cannot delete {path!r} without Spark: scheme {parts.scheme!r} needs the "
                "Hadoop FileSystem API (pass spark=...)"
            )
        local = Path(parts.path if parts.scheme else path)
        if not local.exists():
            return False
        shutil.rmtree(local)
        return True


def file_system(spark: SparkSession | None = None, fs: FileSystem | None = None) -> FileSystem:
    if fs is not None:
        return fs
    return HadoopFileSystem(spark) if spark is not None else LocalFileSystem()


@dataclass(frozen=True, slots=True)
class VersionInfo:
    dataset: str
    version: int
    path: str
    state: str
    current: bool
    started_at: float
    completed_at: float | None = None
    superseded_at: float | None = None
    error: str | None = None
    #: Why the "new version" notification could not be sent (the version is current anyway).
    notify_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "version": self.version,
            "path": self.path,
            "state": self.state,
            "current": self.current,
            "startedAt": self.started_at,
            "completedAt": self.completed_at,
            "supersededAt": self.superseded_at,
            "error": self.error,
        }

    @classmethod
    def _of(cls, row: SnapshotVersionRow, current: int | None) -> VersionInfo:
        return cls(
            row.dataset,
            int(row.version),
            row.path,
            row.state,
            row.version == current,
            row.started_at,
            row.completed_at,
            row.superseded_at,
            row.error,
        )


class SnapshotDataset:
    """A full-refresh dataset: ``write(df)`` publishes a complete new version atomically.

    Build it with :meth:`define` (writers: records location and retention)
    or :meth:`open` (readers and the expiry job: uses what is stored).
    """

    def __init__(
        self,
        store: Store,
        name: str,
        location: str,
        *,
        revisions: RevisionManager | None = None,
        publisher: Publisher | None = None,
        keep_alive_seconds: float = 3600.0,
        fs: FileSystem | None = None,
    ) -> None:
        self.store = store
        #: Where partial files are removed; default: Hadoop FS of the writing session.
        self.fs = fs
        self.name = name
        self.location = location.rstrip("/")
        self.revisions = revisions or RevisionManager(store, clock=store.clock)
        self.publisher = publisher
        self.keep_alive_seconds = keep_alive_seconds

    # -- definition -----------------------------------------------------------
    @classmethod
    def define(
        cls,
        store: Store,
        name: str,
        location: str,
        *,
        ttl_seconds: float | None = None,
        min_versions: int = 1,
        revisions: RevisionManager | None = None,
        publisher: Publisher | None = None,
        keep_alive_seconds: float = 3600.0,
    ) -> SnapshotDataset:
        """Create the dataset, or update its retention; its location cannot change."""
        name = table_name(name)
        location = _location(location, name)
        _policy(ttl_seconds, min_versions, name)
        ds = cls(
            store,
            name,
            location,
            revisions=revisions,
            publisher=publisher,
            keep_alive_seconds=keep_alive_seconds,
        )
        now = ds.revisions.clock()
        with RevisionUnitOfWork(store.engine, write=True) as uow:
            row = uow.datasets.get(name, lock=True)
            if row is None:
                uow.datasets.add(
                    SnapshotDatasetRow(
                        name=name,
                        location=ds.location,
                        current_version=None,
                        ttl_seconds=ttl_seconds,
                        min_versions=min_versions,
                        created_at=now,
                        updated_at=now,
                    )
                )
            elif row.location != ds.location:
                raise ConflictError(
                    f"SNAPSHOT dataset {name} lives at {row.location!r}, not {ds.location!r}; "
                    "its versions cannot move"
                )
            else:
                row.ttl_seconds, row.min_versions, row.updated_at = ttl_seconds, min_versions, now
        return ds

    @classmethod
    def open(
        cls,
        store: Store,
        name: str,
        *,
        revisions: RevisionManager | None = None,
        publisher: Publisher | None = None,
        keep_alive_seconds: float = 3600.0,
    ) -> SnapshotDataset:
        """The dataset as defined in the store (:class:`NotFoundError` if it is not)."""
        with RevisionUnitOfWork(store.engine, write=False) as uow:
            row = uow.datasets.get(table_name(name))
            if row is None:
                raise NotFoundError(f"SNAPSHOT dataset {name} is not defined")
            location = row.location
        return cls(
            store,
            name,
            location,
            revisions=revisions,
            publisher=publisher,
            keep_alive_seconds=keep_alive_seconds,
        )

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
        with RevisionUnitOfWork(self.store.engine, write=True) as uow:
            if uow.datasets.get(self.name) is None:
                raise NotFoundError(
                    f"SNAPSHOT dataset {self.name} is not defined (SnapshotDataset.define first)"
                )
            tx = self.revisions.begin_in(uow, self.name, [FAMILY], self.keep_alive_seconds)
            path = self.version_path(tx.revision)
            uow.datasets.add_version(
                SnapshotVersionRow(
                    dataset=self.name,
                    version=tx.revision,
                    path=path,
                    state=WRITING,
                    started_at=tx.started_at,
                )
            )
        return VersionRun(self, tx, path)

    def version_path(self, version: int) -> str:
        return f"{self.location}/{VERSION_KEY}={version}"

    def notify(self, version: int) -> None:
        """Announce ``version`` as new: add-partition ``version=<n>`` and its set-done."""
        if self.publisher is None:
            return
        db, table = self._notify_table()
        spec = {VERSION_KEY: str(version)}
        self.publisher.announce_partitions(
            db,
            table,
            [spec],
            locations=[self.version_path(version)],
            revision=version,
            replace=True,
        )
        self.publisher.send_mark_set_done(db, table, spec, revision=version)

    # -- reading --------------------------------------------------------------
    def current_version(self) -> int | None:
        with RevisionUnitOfWork(self.store.engine, write=False) as uow:
            row = uow.datasets.get(self.name)
            if row is None:
                raise NotFoundError(f"SNAPSHOT dataset {self.name} is not defined")
            return None if row.current_version is None else int(row.current_version)

    def read(self, spark: SparkSession, version: int | None = None) -> DataFrame:
        """The current version (or ``version``, if still kept) as a DataFrame."""
        path = self.resolve(version)[1]
        return spark.read.parquet(path)

    def resolve(self, version: int | None = None) -> tuple[int, str]:
        """(version, path) a reader should read: the pointer, resolved once."""
        with RevisionUnitOfWork(self.store.engine, write=False) as uow:
            row = uow.datasets.get(self.name)
            if row is None:
                raise NotFoundError(f"SNAPSHOT dataset {self.name} is not defined")
            wanted = row.current_version if version is None else version
            if wanted is None:
                raise NotFoundError(f"SNAPSHOT dataset {self.name} has no complete version yet")
            v = uow.datasets.version(self.name, wanted)
            if v is None or v.state != COMPLETE:
                state = "does not exist" if v is None else f"is {v.state}"
                raise NotFoundError(f"version {wanted} of SNAPSHOT dataset {self.name} {state}")
            return int(wanted), v.path

    def versions(self) -> list[VersionInfo]:
        return dataset_versions(self.store, self.name)

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
        rm = self.dataset.revisions
        with rm.kept_alive(self.tx) as keeper:
            df.write.mode("errorifexists").parquet(self.path)
        if keeper.error is not None:
            raise keeper.error

    def commit(self) -> VersionInfo:
        """Make this version current, in one database transaction with the revision commit.

        A run older than the current version completes but does not move the
        pointer back. Announces the version when it became current.
        """
        ds = self.dataset
        now = ds.revisions.clock()
        with RevisionUnitOfWork(ds.store.engine, write=True) as uow:
            # The dataset row first: expire_versions holds it while it decides.
            dataset = uow.datasets.get(ds.name, lock=True)
            row = uow.datasets.version(ds.name, self.version)
            if dataset is None or row is None or row.state != WRITING:
                state = "gone" if row is None else row.state
                self.state = FAILED
                raise ConflictError(
                    f"run {self.version} of SNAPSHOT dataset {ds.name} cannot commit: its "
                    f"version is {state} (expired by retention after its transaction lapsed?)"
                )
            refusal = ds.revisions.commit_in(uow, self.tx)
            if refusal is not None:
                row.state, row.error = FAILED, str(refusal)
            else:
                row.state, row.completed_at = COMPLETE, now
                current = dataset.current_version
                if current is None or self.version > current:
                    if current is not None:
                        old = uow.datasets.version(ds.name, int(current))
                        if old is not None:
                            old.superseded_at = now
                    dataset.current_version, dataset.updated_at = self.version, now
                else:
                    row.superseded_at = now  # a late run: complete, never current
            uow.session.flush()
            info = VersionInfo._of(row, dataset.current_version)
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
        except Exception as exc:  # reported; expire_versions retries
            problems.append(f"removing {self.path} failed: {exc!r}")
        try:
            ds = self.dataset
            with RevisionUnitOfWork(ds.store.engine, write=True) as uow:
                ds.revisions.abort_in(uow, self.tx)
                row = uow.datasets.version(ds.name, self.version)
                if row is not None:
                    row.state, row.error = FAILED, (text or "aborted")[:2000]
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
            log.warning(
                "version %d of %s is current but its announcement failed: %s",
                self.version,
                self.dataset.name,
                exc,
            )
            return replace(info, notify_error=str(exc))
        return info


# -- inspection and retention ---------------------------------------------------
def datasets(store: Store) -> list[str]:
    with RevisionUnitOfWork(store.engine, write=False) as uow:
        return uow.datasets.names()


def dataset_versions(store: Store, name: str) -> list[VersionInfo]:
    """Every recorded version of ``name``, newest first."""
    with RevisionUnitOfWork(store.engine, write=False) as uow:
        row = uow.datasets.get(table_name(name))
        if row is None:
            raise NotFoundError(f"SNAPSHOT dataset {name} is not defined")
        current = row.current_version
        return [VersionInfo._of(v, current) for v in uow.datasets.versions(name)]


def describe_dataset(store: Store, name: str) -> dict[str, Any]:
    """Location, pointer, retention and versions of ``name`` (``dataset describe``)."""
    name = table_name(name)
    with RevisionUnitOfWork(store.engine, write=False) as uow:
        row = uow.datasets.get(name)
        if row is None:
            raise NotFoundError(f"SNAPSHOT dataset {name} is not defined")
        out: dict[str, Any] = {
            "dataset": name,
            "location": row.location,
            "currentVersion": row.current_version,
            "ttlSeconds": row.ttl_seconds,
            "minVersions": row.min_versions,
        }
    out["versions"] = [v.to_dict() for v in dataset_versions(store, name)]
    return out


def expire_versions(
    store: Store,
    *,
    spark: SparkSession | None = None,
    fs: FileSystem | None = None,
    dataset: str | None = None,
    revisions: RevisionManager | None = None,
) -> list[tuple[str, int]]:
    """Remove the files and rows of versions retention no longer keeps; returns them.

    Per dataset: the current version and the newest ``min_versions``
    complete ones stay; older complete versions go once superseded for
    ``ttl_seconds`` (at once without a TTL); failed runs and runs whose
    transaction is no longer running (killed writers) go at once. Rows are
    marked ``expiring`` before files are touched, so a crash in between is
    finished by the next run. Meant for a scheduled job.
    """
    rm = revisions or RevisionManager(store, clock=store.clock)
    filesystem = file_system(spark, fs)
    names = [table_name(dataset)] if dataset is not None else datasets(store)
    removed: list[tuple[str, int]] = []
    for name in names:
        doomed = _mark_expiring(store, rm, name)
        gone: list[int] = []
        for version, path in doomed:
            try:
                filesystem.delete(path)
            except Exception as exc:  # stays expiring, retried next run
                log.error(
                    "expiring version %d of %s: deleting %s failed: %r", version, name, path, exc
                )
                continue
            gone.append(version)
        if gone:
            with RevisionUnitOfWork(store.engine, write=True) as uow:
                for version in gone:
                    uow.datasets.delete_version(name, version)
            removed.extend((name, v) for v in gone)
            log.info("SNAPSHOT dataset %s: expired versions %s", name, gone)
    return removed


def _mark_expiring(store: Store, rm: RevisionManager, name: str) -> list[tuple[int, str]]:
    now = rm.clock()
    with RevisionUnitOfWork(store.engine, write=True) as uow:
        # Holding the dataset row keeps commits out while we decide (they lock it first).
        ds = uow.datasets.get(name, lock=True)
        if ds is None:
            raise NotFoundError(f"SNAPSHOT dataset {name} is not defined")
        versions = uow.datasets.versions(name)  # newest first
        # Read after the versions: a run's version row and transaction appear together.
        running = {int(t.revision) for t in uow.revisions.running(name) if t.expires_at > now}
        complete = [v for v in versions if v.state == COMPLETE]
        keep = {int(v.version) for v in complete[: ds.min_versions]}
        if ds.current_version is not None:
            keep.add(int(ds.current_version))
        doomed: list[tuple[int, str]] = []
        for v in versions:
            if v.state == COMPLETE:
                if v.version in keep:
                    continue
                since = v.superseded_at if v.superseded_at is not None else v.completed_at
                if (
                    ds.ttl_seconds is not None
                    and since is not None
                    and now - since < ds.ttl_seconds
                ):
                    continue
            elif v.state == WRITING and v.version in running:
                continue
            v.state = EXPIRING
            doomed.append((int(v.version), v.path))
    return doomed


def schedule_expiry(
    scheduler: Any,
    store: Store,
    *,
    spark: SparkSession | None = None,
    interval_seconds: float = 3600.0,
    job_id: str = "snapshot-dataset-expiry",
) -> Any:
    """Add :func:`expire_versions` to an APScheduler scheduler; returns the job."""
    if not interval_seconds > 0:
        raise ValidationError(f"interval_seconds must be positive, got {interval_seconds!r}")
    return scheduler.add_job(
        expire_versions,
        "interval",
        seconds=interval_seconds,
        id=job_id,
        kwargs={"store": store, "spark": spark},
        max_instances=1,
        coalesce=True,
        replace_existing=True,
    )


def _location(location: object, name: str) -> str:
    if not isinstance(location, str) or not location.strip("/ "):
        raise ValidationError(
            f"SNAPSHOT dataset {name}: location must be a non-empty path or URI, got {location!r}"
        )
    return location.rstrip("/")


def _policy(ttl_seconds: float | None, min_versions: int, name: str) -> None:
    if ttl_seconds is not None and (isinstance(ttl_seconds, bool) or not ttl_seconds > 0):
        raise ValidationError(
            f"SNAPSHOT dataset {name}: ttl_seconds must be positive or None, got {ttl_seconds!r}"
        )
    if isinstance(min_versions, bool) or not isinstance(min_versions, int) or min_versions < 1:
        raise ValidationError(
            f"SNAPSHOT dataset {name}: min_versions must be an integer >= 1 (a TTL alone would "
            f"delete every version if the runs stopped), got {min_versions!r}"
        )


__all__ = [
    "FAMILY",
    "VERSION_KEY",
    "FileSystem",
    "HadoopFileSystem",
    "LocalFileSystem",
    "SnapshotDataset",
    "VersionInfo",
    "VersionRun",
    "dataset_versions",
    "datasets",
    "describe_dataset",
    "expire_versions",
    "file_system",
    "schedule_expiry",
]
