"""NotifyingWriter: a partitioned Spark write that announces its partitions when it commits.

::

    w = NotifyingWriter(app, "sales", "orders")
    w.write(df, mode="append", mark_set_done="datestamp=20110228")

The data is written by Spark's own writer at native speed into a staging
directory inside the table; Spark's job commit succeeds only if every task
did. Then, on the driver, a manifest is written, the data is moved into the
table, and one add-partition message per partition is logged and published,
then the optional set-done. A failed job leaves no data, no log entry and no
message. See docs/writers.md for the reasoning and the exact semantics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from partition_notify.publisher import Publisher
from partition_notify.revisions import DEFAULT_FAMILY as DATA_FAMILY
from partition_notify.revisions import RevisionManager, WriteTransaction
from partition_notify.revisions.files import RevisionFiles
from partition_notify.store import TableInfo
from partition_notify.writers.commit import WriteResult, canonical_set_done, complete
from partition_notify.writers.hadoop import HadoopFs
from partition_notify.writers.layout import (
    DATA,
    LOCK,
    MANIFEST,
    MODES,
    Manifest,
    Mode,
    new_write_id,
    partition_pattern,
    staging_dir,
)
from partition_notify.writers.lease import Lease
from partition_notify.writers.progress import Progress
from partition_notify.writers.recovery import commit_step_failure, recover
from partition_notify.writers.spark_errors import (
    check_format,
    guard_partition_names,
    spark_failures,
    writable_location,
)
from partition_notify.writers.target import (
    Target,
    active_session,
    catalog_metadata,
    check_absolute,
    check_keys,
)

from partition_notify.core import limits
from partition_notify.core.errors import (
    ConfigurationError,
    ConflictError,
    UnknownTableError,
    ValidationError,
    WriteOvertakenError,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from partition_notify.contract import SetDoneMessage

log = logging.getLogger(__name__)

SpecLike = str | Mapping[str, object]


class HasPublisher(Protocol):
    """What a writer takes instead of a :class:`Publisher`: one that holds it (the App)."""

    @property
    def publisher(self) -> Publisher: ...


class NotifyingWriter:
    """Writes DataFrames to one partitioned table and announces what each write created.

    ``target`` is an :class:`~partition_notify.app.App` or a :class:`Publisher`;
    writes are transactions of ``app.revisions`` (with a bare Publisher, pass
    ``revisions=`` or ``transactional=False``).
    The table is either a *path table*, registered in partition-notify with its
    partition keys and location (pass ``partition_keys`` and ``location`` to
    register it), or a *Spark catalog table* (``catalog_table=``, e.g.
    ``"sales.orders"``), whose location, keys and format come from the catalog
    (through ``spark=`` or the active SparkSession). The table is registered
    when the writer is made, so subscribers can follow it before the first write.
    """

    def __init__(self, target: HasPublisher | Publisher, db: str, table: str, *,
                 location: str | None = None, partition_keys: Sequence[str] | None = None,
                 catalog_table: str | None = None, format: str = "parquet",
                 options: Mapping[str, str] | None = None, progress: bool = False,
                 lease_seconds: float = 300.0, spark: SparkSession | None = None,
                 revisions: RevisionManager | None = None, transactional: bool = True,
                 keep_alive_seconds: float | None = None) -> None:
        publisher = getattr(target, "publisher", target)
        if not isinstance(publisher, Publisher):
            raise ConfigurationError(
                f"NotifyingWriter needs an App or a Publisher, got {type(target).__name__}"
            )
        # NaN would make a lease that never goes stale (its write never recovered).
        if limits.seconds(lease_seconds, field="lease_seconds") <= 0:
            raise ValidationError(f"lease_seconds must be positive, got {lease_seconds!r}")
        if isinstance(partition_keys, str):  # list() of it would be one key per letter
            raise ValidationError(
                f"partition_keys must be a list of key names, e.g. [{partition_keys!r}], "
                f"not the string {partition_keys!r:.80}")
        check_absolute(location, f"{db}.{table}")
        self.publisher = publisher
        self.db, self.table = db, table
        self.location = location
        self.partition_keys = list(partition_keys) if partition_keys is not None else None
        self.catalog_table = catalog_table
        self.format = format
        self.options = dict(options or {})
        self.progress = progress
        self.lease_seconds = lease_seconds
        #: With a revision manager every write is a write transaction:
        #: its partitions and messages carry the revision, a failed write aborts it.
        #: An App brings its own (``app.revisions``); with a bare Publisher pass ``revisions=``.
        if revisions is None and transactional:
            revisions = getattr(target, "revisions", None)
            if not isinstance(revisions, RevisionManager):
                raise ConfigurationError(
                    "a transactional NotifyingWriter needs an App, or a Publisher with "
                    "revisions=app.revisions (or transactional=False)"
                )
        self.revisions = revisions
        #: Keep-alive of each write transaction (default: the manager's); a heartbeat
        #: renews it every third of that from begin to commit, however long Spark runs.
        self.keep_alive_seconds = keep_alive_seconds
        self.files = RevisionFiles(self.revisions) if self.revisions is not None else None
        self._target: Target | None = None
        # Registering now lets subscribers follow the table before the first write.
        self.info: TableInfo
        if catalog_table:
            self._target = self._catalog_target(spark or active_session())
            self.info = self._target.info
        else:
            try:
                self.info = self._registered(self.partition_keys, location)
            except UnknownTableError as exc:
                raise UnknownTableError(
                    f"{exc}; or pass partition_keys= and location= to NotifyingWriter"
                ) from exc

    # -- public API -----------------------------------------------------------
    def write(self, df: DataFrame, *, mode: Mode = "append",
              mark_set_done: SpecLike | None = None, revision: int | None = None,
              ) -> WriteResult:
        """Write ``df`` (see :meth:`_write`), inside a write transaction when the
        writer has a revision manager and no explicit ``revision`` is given."""
        # Checked before Spark runs: the commit step refusing them after Spark
        # committed would leave a manifest that fails every later write's recovery.
        if getattr(df, "sparkSession", None) is None:
            raise ValidationError(f"write() takes a Spark DataFrame, got {type(df).__name__}")
        revision = limits.revision(revision)
        if revision is not None and self.files is not None:
            self._check_running(revision)
        if self.revisions is None or revision is not None:
            return self._write(df, mode=mode, mark_set_done=mark_set_done, revision=revision)
        tx = self.revisions.begin_write_transaction(self.info.qualified, [DATA_FAMILY],
                                                    self.keep_alive_seconds)
        attempt = _Attempt(tx)
        try:
            # The heartbeat runs from begin until the commit step committed the
            # revision (or the write failed), and stops on every way out.
            with self.revisions.kept_alive(tx):
                return self._write(df, mode=mode, mark_set_done=mark_set_done,
                                   revision=tx.revision, attempt=attempt)
        except BaseException:
            if not attempt.committing:
                self._abort(tx)
            # Otherwise the data may be in: recover() finishes the write and settles
            # the revision (commits it, or adopts it into a new one if it expired).
            raise

    def _write(self, df: DataFrame, *, mode: Mode = "append",
               mark_set_done: SpecLike | None = None, revision: int | None = None,
               attempt: _Attempt | None = None) -> WriteResult:
        """Write ``df``; announce each partition it wrote; then the optional set-done.

        ``mode="append"`` adds files (a partition already announced is not
        announced again); ``mode="overwrite"`` replaces exactly the partitions
        present in ``df`` (others are untouched) and announces each again with
        ``replace=True``. ``mark_set_done`` is validated before anything is
        written and sent only if the whole write succeeded.
        """
        if mode not in MODES:
            raise ValidationError(f"mode must be one of {list(MODES)}, got {mode!r}")
        spark = df.sparkSession
        target = self._resolve(spark)
        done_spec = canonical_set_done(target.info, mark_set_done)
        frame = target.prepare(df)
        fs = HadoopFs(spark, target.location)
        recover(self.publisher, fs, spark, target.location, files=self.files,
                stale_after_seconds=self.lease_seconds, lease_seconds=self.lease_seconds,
                raise_refused=False)
        staged = self._stage(frame, fs, target, mode=mode, set_done=done_spec,
                             revision=revision, owns_revision=attempt is not None)
        finish = None if attempt is None else self._settler(attempt, target.info.id)
        if attempt is not None:
            attempt.committing = True
        manifest = staged.manifest
        try:
            return complete(self.publisher, fs, spark, manifest, lease=staged.lease,
                            resumed=False, spark_seconds=staged.spark_seconds,
                            list_seconds=staged.list_seconds, files=self.files, finish=finish)
        except WriteOvertakenError:
            raise  # nothing was placed: there is nothing to recover
        except Exception as exc:
            failure = commit_step_failure(manifest, target.info.qualified, exc,
                                          attempt is not None and attempt.refused is exc)
            if failure is exc:
                raise
            raise failure from exc
        finally:
            staged.lease.stop()

    def _stage(self, frame: DataFrame, fs: HadoopFs, target: Target, *, mode: Mode,
               set_done: str | None, revision: int | None, owns_revision: bool) -> _Staged:
        """Let Spark write ``frame`` into a fresh staging directory, then write its manifest.

        On any failure the staging directory is deleted: nothing of the write remains.
        """
        write_id = new_write_id()
        staging = staging_dir(target.location, write_id)
        data = f"{staging}/{DATA}"
        with writable_location(target.location, target.info.qualified):
            lease = Lease.create(fs, f"{staging}/{LOCK}", self.lease_seconds)
        started = time.monotonic()
        try:
            self._save(frame, target, data)
            spark_seconds = time.monotonic() - started
            partitions = fs.glob(data, partition_pattern(target.keys))
            manifest = Manifest(
                write_id=write_id, db=target.info.db, table=target.info.name,
                location=target.location, keys=list(target.keys), mode=mode,
                partitions=sorted(partitions), set_done=set_done, revision=revision,
                store_mark=self.publisher.store.log.max_event_id(),
                catalog_table=target.catalog_table, owns_revision=owns_revision,
            )
            # Anything the publisher would refuse fails here, before data is visible.
            Publisher.validate_partitions(target.info, manifest.specs())
            fs.write_atomic(f"{staging}/{MANIFEST}", manifest.to_json())
        except BaseException:
            lease.stop()
            _discard(fs, staging, write_id)
            raise
        list_seconds = time.monotonic() - started - spark_seconds
        return _Staged(manifest, lease, spark_seconds, list_seconds)

    def _save(self, frame: DataFrame, target: Target, data: str) -> None:
        """The Spark job: native partitioned write; fails if ``data`` exists."""
        guarded = guard_partition_names(frame, target.keys)
        writer = guarded.write.partitionBy(*target.keys).format(target.format)
        writer = writer.options(**{**target.options, **self.options}).mode("errorifexists")
        with spark_failures(target.info.qualified):
            if self.progress:
                with Progress(frame.sparkSession, target.info.qualified):
                    writer.save(data)
            else:
                writer.save(data)

    def send_mark_set_done(self, partial_spec: SpecLike, *,
                           revision: int | None = None) -> SetDoneMessage:
        """Mark every partition matching ``partial_spec`` done (HCatOutputFormat's mutator)."""
        return self.publisher.send_mark_set_done(self.db, self.table, partial_spec,
                                                 revision=revision)

    def recover(self, spark: SparkSession | None = None, *,
                stale_after_seconds: float | None = None) -> list[WriteResult]:
        """Finish committed writes whose driver died; delete never-committed staging.

        Only writes whose lease was not renewed for ``stale_after_seconds``
        (default: the writer's ``lease_seconds``) are touched, so a live
        writer elsewhere is left alone. Every write runs this first.
        """
        session = spark or active_session()
        target = self._resolve(session)
        fs = HadoopFs(session, target.location)
        stale = self.lease_seconds if stale_after_seconds is None else stale_after_seconds
        return recover(self.publisher, fs, session, target.location, files=self.files,
                       stale_after_seconds=stale, lease_seconds=self.lease_seconds)

    # -- internals ------------------------------------------------------------
    def _check_running(self, revision: int) -> None:
        """Files tagged with a finished revision would change snapshots already taken
        (a committed one) or vanish (an aborted one); a number not allocated yet
        belongs to a later writer's transaction (:class:`NotFoundError`)."""
        assert self.files is not None
        state, _ = self.files.transaction(self.info.qualified, revision)
        if state != "running":
            raise ConflictError(
                f"revision {revision} of {self.info.qualified} is {state}; pass the revision "
                "of a running write transaction of this table, or none (write() begins one)")

    def _settler(self, attempt: _Attempt, table_id: int) -> Callable[[], int]:
        files = self.files
        assert files is not None

        def settle() -> int:
            try:
                return files.settle(attempt.tx, table_id=table_id)
            except ConflictError as exc:  # refused, not unreachable: the error says so
                attempt.refused = exc
                raise

        return settle

    def _abort(self, tx: WriteTransaction) -> None:
        assert self.revisions is not None
        try:
            self.revisions.abort_write_transaction(tx)
        except Exception as exc:  # the write's own error matters more
            log.error("could not abort transaction %d on %s (%s); it expires after its "
                      "keep-alive", tx.revision, tx.table, exc)

    def _resolve(self, spark: SparkSession) -> Target:
        if self._target is None:
            self._target = self._catalog_target(spark) if self.catalog_table \
                else self._path_target(spark)
        return self._target

    def _registered(self, keys: Sequence[str] | None, location: str | None) -> TableInfo:
        try:
            info = self.publisher.table(self.db, self.table)
        except UnknownTableError:
            if keys is None or location is None:
                raise
            return self.publisher.register_table(self.db, self.table, keys, location=location)
        if keys is not None:
            check_keys(keys, info, "the writer")
        return info

    def _path_target(self, spark: SparkSession) -> Target:
        info = self.info
        raw = self.location or info.location
        if not raw:
            raise ConfigurationError(
                f"{info.qualified} is registered without a location; pass location="
            )
        location = HadoopFs(spark, raw).root
        if self.location and info.location and HadoopFs(spark, info.location).root != location:
            raise ConfigurationError(
                f"{info.qualified} is registered at {info.location}, not {self.location}"
            )
        check_format(spark, self.format, info.qualified)
        return Target(info=info, location=location, keys=info.partition_keys,
                      format=self.format)

    def _catalog_target(self, spark: SparkSession) -> Target:
        assert self.catalog_table is not None
        raw, keys, columns, provider = catalog_metadata(spark, self.catalog_table)
        location = HadoopFs(spark, raw).root
        info = self._registered(keys, location)
        return Target(info=info, location=location, keys=keys, format=provider,
                      catalog_table=self.catalog_table, columns=columns)


@dataclass(frozen=True)
class _Staged:
    """A write Spark committed into its staging directory, manifest written."""

    manifest: Manifest
    lease: Lease
    spark_seconds: float
    list_seconds: float


@dataclass
class _Attempt:
    """One transactional write: ``committing`` once the commit step began (data may be in)."""

    tx: WriteTransaction
    committing: bool = False
    #: ``settle`` refused the revision (aborted on request, or overtaken since it expired).
    refused: Exception | None = None


def _discard(fs: HadoopFs, staging: str, write_id: str) -> None:
    try:
        fs.delete(staging)
    except Exception as exc:  # the original error matters more
        log.error("write %s failed and its staging %s could not be deleted (%s); "
                  "recover() will delete it once its lease lapses", write_id, staging, exc)
