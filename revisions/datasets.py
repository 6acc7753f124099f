"""SNAPSHOT datasets in the store: versions, the current-version pointer, retention.

A SNAPSHOT dataset is a full-refresh dataset read as one consistent version.
Every run writes a *complete* new version to ``<location>/version=<n>/``
where ``n`` is the run's revision from the :class:`RevisionManager` (the
revision is the version). Only when the write has succeeded does the run
commit, and the commit flips the current-version pointer in the same
database transaction. Readers resolve the pointer first and then read that
one directory, so they see the old version or the new one, never a mix.

Retention trade-off: a TTL alone would delete everything if the runs
stopped, so the newest ``min_versions`` complete versions (at least one,
always including the current one) are kept whatever their age; older ones go
once they have been superseded for ``ttl_seconds`` (or at once when no TTL
is set). The TTL counts from when a version stopped being current, so it is
the grace period of readers still on the previous version: set it longer
than the longest read. :meth:`SnapshotDatasets.expire` enforces it; ``serve``
runs it every ``PN_DATASET_EXPIRY_INTERVAL_SECONDS``.

This module is the Spark-free bookkeeping; writing and reading versions with
Spark is :mod:`partition_notify.writers.snapshot_dataset`.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from partition_notify.revisions.manager import RevisionManager
from partition_notify.revisions.model import (
    DEFAULT_FAMILY,
    WriteTransaction,
    dataset_name,
    table_name,
)
from partition_notify.revisions.repositories import RevisionUnitOfWork
from partition_notify.revisions.schema import SnapshotDatasetRow, SnapshotVersionRow

from partition_notify.core.errors import (
    ConfigurationError,
    ConflictError,
    NotFoundError,
    ValidationError,
)
from partition_notify.core.limits import MAX_SECONDS, relative_path

log = logging.getLogger(__name__)

#: The one column family of a dataset's write transactions.
FAMILY = DEFAULT_FAMILY
#: Partition key of the notification table of a dataset (and its directories).
VERSION_KEY = "version"
#: Versions of a dataset kept whatever their age, unless defined otherwise.
DEFAULT_MIN_VERSIONS = 1

WRITING, COMPLETE, FAILED, EXPIRING = "writing", "complete", "failed", "expiring"


class FileSystem(Protocol):
    def delete(self, path: str) -> bool:
        """Remove ``path`` recursively; False if it did not exist."""


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
        return cls(row.dataset, int(row.version), row.path, row.state, row.version == current,
                   row.started_at, row.completed_at, row.superseded_at, row.error)


def version_path(location: str, version: int) -> str:
    return f"{location}/{VERSION_KEY}={version}"


class SnapshotDatasets:
    """Every SNAPSHOT dataset of a store; ``app.datasets`` is the wired one."""

    def __init__(self, revisions: RevisionManager) -> None:
        self.revisions = revisions

    def _uow(self, *, write: bool) -> RevisionUnitOfWork:
        return RevisionUnitOfWork(self.revisions.engine, write=write)

    # -- definition -------------------------------------------------------------
    def define(self, name: str, location: str, *, ttl_seconds: float | None = None,
               min_versions: int = DEFAULT_MIN_VERSIONS) -> tuple[str, str]:
        """Create the dataset, or update its retention; returns (name, location).

        Its location cannot change (:class:`ConflictError`).
        """
        name = dataset_name(name)
        location = _location(location, name)
        _policy(ttl_seconds, min_versions, name)
        now = self.revisions.clock()
        with self._uow(write=True) as uow:
            row = uow.datasets.get(name, lock=True)
            if row is None:
                uow.datasets.add(SnapshotDatasetRow(
                    name=name, location=location, current_version=None, ttl_seconds=ttl_seconds,
                    min_versions=min_versions, created_at=now, updated_at=now))
            elif row.location != location:
                raise ConflictError(
                    f"SNAPSHOT dataset {name} lives at {row.location!r}, not {location!r}; "
                    "its versions cannot move"
                )
            else:
                row.ttl_seconds, row.min_versions, row.updated_at = ttl_seconds, min_versions, now
        return name, location

    def location(self, name: str) -> str:
        """Where ``name`` keeps its versions (:class:`NotFoundError` if it is not defined)."""
        with self._uow(write=False) as uow:
            return self._row(uow, table_name(name)).location

    # -- runs -------------------------------------------------------------------
    def start(self, name: str, location: str,
              keep_alive_seconds: float | None) -> tuple[WriteTransaction, str]:
        """Begin a run: its write transaction and the directory it fills."""
        with self._uow(write=True) as uow:
            if uow.datasets.get(name) is None:
                raise NotFoundError(
                    f"SNAPSHOT dataset {name} is not defined (SnapshotDataset.define first)"
                )
            tx = self.revisions.begin_in(uow, name, [FAMILY], keep_alive_seconds)
            path = version_path(location, tx.revision)
            uow.datasets.add_version(SnapshotVersionRow(
                dataset=name, version=tx.revision, path=path, state=WRITING,
                started_at=tx.started_at))
        return tx, path

    def commit(self, name: str, tx: WriteTransaction) -> tuple[VersionInfo, ConflictError | None]:
        """Make run ``tx`` current, in one database transaction with the revision commit.

        A run older than the current version completes but does not move the
        pointer back. Returns the version and, if the revision could not commit
        (it expired), that refusal: the version is then recorded as failed.
        """
        now = self.revisions.clock()
        with self._uow(write=True) as uow:
            # The dataset row first: expire holds it while it decides.
            dataset = uow.datasets.get(name, lock=True)
            row = uow.datasets.version(name, tx.revision)
            if dataset is None or row is None or row.state != WRITING:
                state = "gone" if row is None else row.state
                raise ConflictError(
                    f"run {tx.revision} of SNAPSHOT dataset {name} cannot commit: its "
                    f"version is {state} (expired by retention after its transaction lapsed?)"
                )
            refusal = self.revisions.commit_in(uow, tx)
            if refusal is not None:
                row.state, row.error = FAILED, str(refusal)
            else:
                self._make_current(uow, dataset, row, now)
            uow.session.flush()
            return VersionInfo._of(row, dataset.current_version), refusal

    @staticmethod
    def _make_current(uow: RevisionUnitOfWork, dataset: SnapshotDatasetRow,
                      row: SnapshotVersionRow, now: float) -> None:
        row.state, row.completed_at = COMPLETE, now
        current = dataset.current_version
        if current is not None and row.version <= current:
            row.superseded_at = now  # a late run: complete, never current
            return
        if current is not None:
            old = uow.datasets.version(dataset.name, int(current))
            if old is not None:
                old.superseded_at = now
        dataset.current_version, dataset.updated_at = row.version, now

    def abort(self, name: str, tx: WriteTransaction, error: str) -> None:
        """Abort run ``tx`` and record its version as failed; the pointer stays."""
        with self._uow(write=True) as uow:
            self.revisions.abort_in(uow, tx)
            row = uow.datasets.version(name, tx.revision)
            if row is not None:
                row.state, row.error = FAILED, error[:2000]

    # -- reading ----------------------------------------------------------------
    def current_version(self, name: str) -> int | None:
        with self._uow(write=False) as uow:
            row = self._row(uow, name)
            return None if row.current_version is None else int(row.current_version)

    def resolve(self, name: str, version: int | None = None) -> tuple[int, str]:
        """(version, path) a reader should read: the pointer, resolved once."""
        with self._uow(write=False) as uow:
            row = self._row(uow, name)
            wanted = row.current_version if version is None else version
            if wanted is None:
                raise NotFoundError(f"SNAPSHOT dataset {name} has no complete version yet")
            v = uow.datasets.version(name, wanted)
            if v is None or v.state != COMPLETE:
                state = "does not exist" if v is None else f"is {v.state}"
                raise NotFoundError(f"version {wanted} of SNAPSHOT dataset {name} {state}")
            return int(wanted), v.path

    def names(self) -> list[str]:
        with self._uow(write=False) as uow:
            return uow.datasets.names()

    def versions(self, name: str) -> list[VersionInfo]:
        """Every recorded version of ``name``, newest first."""
        name = table_name(name)
        with self._uow(write=False) as uow:
            current = self._row(uow, name).current_version
            return [VersionInfo._of(v, current) for v in uow.datasets.versions(name)]

    def describe(self, name: str) -> dict[str, Any]:
        """Location, pointer, retention and versions of ``name`` (``dataset describe``)."""
        name = table_name(name)
        with self._uow(write=False) as uow:
            row = self._row(uow, name)
            out: dict[str, Any] = {
                "dataset": name,
                "location": row.location,
                "currentVersion": row.current_version,
                "ttlSeconds": row.ttl_seconds,
                "minVersions": row.min_versions,
            }
        out["versions"] = [v.to_dict() for v in self.versions(name)]
        return out

    @staticmethod
    def _row(uow: RevisionUnitOfWork, name: str) -> SnapshotDatasetRow:
        row = uow.datasets.get(name)
        if row is None:
            raise NotFoundError(f"SNAPSHOT dataset {name} is not defined")
        return row

    # -- retention --------------------------------------------------------------
    def expire(self, fs: FileSystem, dataset: str | None = None) -> list[tuple[str, int]]:
        """Remove the files and rows of versions retention no longer keeps; returns them.

        Per dataset: the current version and the newest ``min_versions``
        complete ones stay; older complete versions go once superseded for
        ``ttl_seconds`` (at once without a TTL); failed runs and runs whose
        transaction is no longer running (killed writers) go at once. Rows are
        marked ``expiring`` before files are touched, so a crash in between is
        finished by the next run.
        """
        names = [table_name(dataset)] if dataset is not None else self.names()
        removed: list[tuple[str, int]] = []
        for name in names:
            gone = [v for v, path in self._mark_expiring(name) if _delete(fs, name, v, path)]
            if gone:
                with self._uow(write=True) as uow:
                    for version in gone:
                        uow.datasets.delete_version(name, version)
                removed.extend((name, v) for v in gone)
                log.info("SNAPSHOT dataset %s: expired versions %s", name, gone)
        return removed

    def _mark_expiring(self, name: str) -> list[tuple[int, str]]:
        now = self.revisions.clock()
        with self._uow(write=True) as uow:
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
                if v.state == COMPLETE and (v.version in keep or _within_ttl(ds, v, now)):
                    continue
                if v.state == WRITING and v.version in running:
                    continue
                v.state = EXPIRING
                doomed.append((int(v.version), v.path))
        return doomed


def _within_ttl(ds: SnapshotDatasetRow, v: SnapshotVersionRow, now: float) -> bool:
    since = v.superseded_at if v.superseded_at is not None else v.completed_at
    return ds.ttl_seconds is not None and since is not None and now - since < ds.ttl_seconds


def _delete(fs: FileSystem, name: str, version: int, path: str) -> bool:
    try:
        fs.delete(path)
    except Exception as exc:  # stays expiring, retried next run
        log.error("expiring version %d of %s: deleting %s failed: %r", version, name, path, exc)
        return False
    return True


def _location(location: object, name: str) -> str:
    if not isinstance(location, str) or not location.strip("/ "):
        raise ValidationError(
            f"SNAPSHOT dataset {name}: location must be a non-empty path or URI, got {location!r}"
        )
    if relative_path(location):
        # Each process would resolve it against its own working directory: the
        # writer's Spark JVM writes the versions in one place, serve expires another.
        raise ValidationError(
            f"SNAPSHOT dataset {name}: location must be an absolute path or a URI "
            f"(file:, hdfs://, s3a://...), got the relative path {location!r:.200}")
    return location.rstrip("/")


def _policy(ttl_seconds: float | None, min_versions: int, name: str) -> None:
    if ttl_seconds is not None and (
            isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int | float)
            or not 0 < ttl_seconds <= MAX_SECONDS):  # NaN fails; inf is stored as no JSON
        raise ValidationError(
            f"SNAPSHOT dataset {name}: ttl_seconds must be a positive number of seconds, "
            f"at most {MAX_SECONDS}, or None, got {ttl_seconds!r}")
    if isinstance(min_versions, bool) or not isinstance(min_versions, int) or min_versions < 1:
        raise ValidationError(
            f"SNAPSHOT dataset {name}: min_versions must be an integer >= 1 (a TTL alone would "
            f"delete every version if the runs stopped), got {min_versions!r}"
        )


__all__ = [
    "COMPLETE",
    "DEFAULT_MIN_VERSIONS",
    "EXPIRING",
    "FAILED",
    "FAMILY",
    "VERSION_KEY",
    "WRITING",
    "FileSystem",
    "LocalFileSystem",
    "SnapshotDatasets",
    "VersionInfo",
    "version_path",
]
