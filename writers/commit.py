"""The driver-side commit of a staged write, from its manifest.

Runs after Spark's own job commit put the data in the staging directory and
the manifest was written. Every step is idempotent, so a process that takes
over a dead writer's manifest (:mod:`partition_notify.writers.recovery`) runs the same code:

0. transactional writes: record the staged data files under the revision
   (once per write, before anything moves);
1. overwrite only: move the files of the partitions being replaced aside
   (transactional writes: into ``<partition>/_pn_retired/<write_id>/``, where
   older snapshots still read them) or delete the partitions, then mark that
   done (never again after the merge began: it would remove the new data);
2. move the staged tree into the table (one FileOutputCommitter merge).
   Transactional writes do 1-2 under their table's placement lease, and a write
   that an overwrite of a later revision overtook is refused there, before
   anything moves (``WriteOvertakenError``: its staged data deleted, the
   revision it owns aborted);
3. catalog tables: ``ALTER TABLE ADD IF NOT EXISTS PARTITION``; refresh;
4. log and publish one add-partition message per partition (after the data
   is readable); on a resumed write, skip what the log already holds;
5. the set-done, if the write asked for one;
6. settle the revision (``finish``: commit it, or adopt an expired one), so
   a failure here leaves the manifest for recovery;
7. delete the staging directory, manifest included.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from partition_notify.publisher import Publisher
from partition_notify.store import TableInfo
from partition_notify.writers.hadoop import HadoopFs
from partition_notify.writers.layout import DATA, REPLACED, Manifest, partition_pattern
from partition_notify.writers.lease import Lease
from partition_notify.writers.target import add_catalog_partitions

from partition_notify.contract import AddPartitionMessage, SetDoneMessage, decode, spec
from partition_notify.core.errors import (
    AbortedOverwriteError,
    PublishError,
    WriteOvertakenError,
)

if TYPE_CHECKING:
    from partition_notify.revisions.files import RevisionFiles
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteResult:
    """What one write did."""

    write_id: str
    table: str
    mode: str
    #: Every partition the write put data into, in the table's key order.
    partitions: list[dict[str, str]]
    #: Add-partition messages logged (appends into known partitions are not announced).
    announced: list[AddPartitionMessage]
    set_done: SetDoneMessage | None
    #: Set when the log holds the messages but the broker did not confirm them;
    #: the relay delivers them later.
    delivery_error: str | None = None
    #: The Spark job alone.
    spark_seconds: float = 0.0
    #: The commit step (list and manifest are in ``steps["list"]``).
    commit_seconds: float = 0.0
    resumed: bool = False
    #: Seconds per step after the Spark job: list (+ manifest), record, replace, move,
    #: catalog, log.
    steps: dict[str, float] = field(default_factory=dict)
    #: The committed revision the write's data belongs to (None without a revision).
    revision: int | None = None


def complete(publisher: Publisher, fs: HadoopFs, spark: SparkSession, manifest: Manifest, *,
             lease: Lease, resumed: bool, spark_seconds: float = 0.0,
             list_seconds: float = 0.0, files: RevisionFiles | None = None,
             finish: Callable[[], int | None] | None = None,
             adopting: Sequence[int] = ()) -> WriteResult:
    """Run the commit step of ``manifest``; ``finish`` (commit the write's revision,
    returning the committed one) runs after the log step, before the staging
    directory is deleted, so a failure there leaves the write to recovery.
    ``adopting``: the expired revisions ``finish`` adopts (a recovery), checked again
    when the placement lease is taken (``RevisionFiles.placing``)."""
    clock = _StepClock()
    specs = manifest.specs()  # parsed before anything moves: a bad manifest stops here
    try:
        _place_data(fs, spark, manifest, specs, files, clock, adopting)
    except WriteOvertakenError as exc:
        lease.stop()
        discard_overtaken(fs, manifest, files, exc)
        raise
    info = publisher.table(manifest.db, manifest.table)
    announced, done, delivery_error = _log(publisher, info, manifest, specs, resumed)
    clock.step("log")
    revision = finish() if finish is not None else manifest.revision
    clock.step("revision")
    lease.stop()
    fs.delete(manifest.staging)
    return WriteResult(
        write_id=manifest.write_id, table=info.qualified, mode=manifest.mode,
        partitions=specs, announced=announced, set_done=done,
        delivery_error=delivery_error, spark_seconds=spark_seconds,
        commit_seconds=time.monotonic() - clock.started, resumed=resumed,
        steps={"list": list_seconds, **clock.steps},
        revision=revision,
    )


class _StepClock:
    """Seconds spent in each step of the commit, for :attr:`WriteResult.steps`."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.steps: dict[str, float] = {}

    def step(self, name: str) -> None:
        """The step ``name`` just ended: it took the time since the previous one ended."""
        self.steps[name] = time.monotonic() - self.started - sum(self.steps.values())


def _place_data(fs: HadoopFs, spark: SparkSession, manifest: Manifest,
                specs: list[dict[str, str]], files: RevisionFiles | None,
                clock: _StepClock, adopting: Sequence[int] = ()) -> None:
    """Steps 0-3: record the staged files, replace (overwrite), move, catalog."""
    staging = manifest.staging
    if files is not None and manifest.revision is not None:
        files.record(manifest.revision_table, manifest.revision, manifest.write_id,
                     lambda: staged_files(fs, manifest))
        clock.step("record")
        _place_in_revision(fs, manifest, files, manifest.revision, clock, adopting)
    else:
        clock.step("record")
        if manifest.mode == "overwrite" and not fs.exists(f"{staging}/{REPLACED}"):
            fs.delete_many(manifest.locations())
            fs.create(f"{staging}/{REPLACED}", b"", exclusive=False)
        clock.step("replace")
        fs.merge_into(f"{staging}/{DATA}", manifest.location, manifest.attempt)
        clock.step("move")
    if manifest.catalog_table is not None:
        add_catalog_partitions(spark, manifest.catalog_table, manifest.keys, specs,
                               manifest.locations())
    else:
        spark.catalog.refreshByPath(manifest.location)
    clock.step("catalog")


def _log(publisher: Publisher, info: TableInfo, manifest: Manifest,
         specs: list[dict[str, str]], resumed: bool,
         ) -> tuple[list[AddPartitionMessage], SetDoneMessage | None, str | None]:
    """Steps 4-5: log and publish what the log does not hold yet.

    A broker that does not confirm is not an error of the write: the log holds
    the messages and the relay delivers them, so the first such failure is
    returned (``delivery_error``) instead of raised.
    """
    logged_parts: set[str] = set()
    logged_done: set[str] = set()
    if resumed:
        logged_parts, logged_done = _logged_since(publisher, info, manifest.store_mark)
    todo = [(s, loc) for s, loc in zip(specs, manifest.locations(), strict=True)
            if spec.canonical(s) not in logged_parts]
    failures: list[str] = []
    announced: list[AddPartitionMessage] = []
    if todo:
        try:
            announced = publisher.announce_partitions(
                manifest.db, manifest.table, [s for s, _ in todo],
                locations=[loc for _, loc in todo], revision=manifest.revision,
                replace=manifest.mode == "overwrite")
        except PublishError as exc:
            failures.append(str(exc))
            log.warning("write %s: %s", manifest.write_id, exc)
    done: SetDoneMessage | None = None
    if manifest.set_done is not None and manifest.set_done not in logged_done:
        try:
            done = publisher.send_mark_set_done(manifest.db, manifest.table, manifest.set_done,
                                                revision=manifest.revision)
        except PublishError as exc:
            failures.append(str(exc))
            log.warning("write %s: %s", manifest.write_id, exc)
    return announced, done, failures[0] if failures else None


def _place_in_revision(fs: HadoopFs, manifest: Manifest, files: RevisionFiles,
                       revision: int, clock: _StepClock, adopting: Sequence[int]) -> None:
    """Steps 1-2 of a transactional write, under its table's placement lease.

    The overwrite's retirement (rows and files) and the merge are one locked step,
    so no other write's files land between them; a write an overwrite of a later
    revision overtook is refused before anything moves (:class:`WriteOvertakenError`).
    The done-marker of the retirement is made once its rows committed: a resumed
    overwrite retires again (the rows are idempotent and its own files stay).
    """
    staging = manifest.staging
    retire = manifest.mode == "overwrite" and not fs.exists(f"{staging}/{REPLACED}")
    if retire or fs.merge_pending(f"{staging}/{DATA}", manifest.location, manifest.attempt):
        # Begun, some of its files may already lie in the table (revisions/files.py).
        begun = not fs.exists(f"{staging}/{DATA}")
        with files.placing(manifest.revision_table, revision, manifest.write_id,
                           manifest.partitions, merge_begun=begun, retiring=retire,
                           adopting=adopting) as place:
            if retire:
                # Older snapshots still read these files where they go.
                keep = place.retire(manifest.partitions, manifest.retired)
                fs.retire_files(manifest.location, manifest.partitions, manifest.retired,
                                keep=keep, guard=place.lease.check)
            clock.step("replace")
            # A lease lost (taken over) stops the renames: the recovery finishes them.
            fs.merge_into(f"{staging}/{DATA}", manifest.location, manifest.attempt,
                          guard=place.lease.check)
    else:
        clock.step("replace")  # a resumed write whose data is in: nothing to move
    if retire:
        fs.create(f"{staging}/{REPLACED}", b"", exclusive=False)
    clock.step("move")


def discard_overtaken(fs: HadoopFs, manifest: Manifest, files: RevisionFiles | None,
                      why: WriteOvertakenError | None = None) -> None:
    """A refused write (overtaken, or an overwrite aborted on request before it placed:
    ``why``): delete its staged data and abort the revision it owns; an overwrite's
    files its cut-short placement had moved aside go where the rows say first."""
    if files is not None and manifest.revision is not None and manifest.mode == "overwrite":
        _return_retired(fs, manifest, files, manifest.revision)
    if not fs.exists(f"{manifest.staging}/{DATA}"):  # its merge had begun: the job dir is its
        fs.discard_merge(manifest.location, manifest.attempt)
    fs.delete(manifest.staging)
    if files is None or manifest.revision is None:
        return
    # A revision the caller passed is the caller's to abort; the write's own placement
    # record goes either way (it never finishes now).
    state = files.discard(manifest.revision_table, manifest.revision, manifest.write_id,
                          abort=manifest.owns_revision)
    if not manifest.owns_revision:
        return
    aborted = isinstance(why, AbortedOverwriteError)
    reason = ("aborted on request before it placed" if aborted
              else "overtaken by a later overwrite")
    log.error("write %s: %s revision %d of %s: %s, not placed; its staged data is deleted",
              manifest.write_id, "aborted" if state == "running" else f"left {state}",
              manifest.revision, manifest.revision_table, reason,
              extra={"pn_event": "write.discarded_aborted" if aborted
                     else "write.discarded_overtaken"})


def _return_retired(fs: HadoopFs, manifest: Manifest, files: RevisionFiles,
                    revision: int) -> None:
    """Move what the refused overwrite moved into ``<partition>/<its retired folder>``
    (a placement cut short: no rows say so) to where the rows say each file is."""
    base, sub = manifest.location, manifest.retired
    with files.returning(manifest.revision_table, revision, manifest.write_id,
                         manifest.partitions) as home:
        for partition in manifest.partitions:
            folder = f"{base}/{partition}/{sub}"
            names = fs.glob(folder, "*")
            for name in names:
                to = home(partition, name)
                if to == sub:
                    continue  # the rows say it is here (recorded: not this write's alone)
                dest = f"{base}/{partition}" if to is None else f"{base}/{partition}/{to}"
                fs.mkdirs(dest)
                if not fs.rename(f"{folder}/{name}", f"{dest}/{name}"):
                    raise OSError(f"could not move {folder}/{name} back to {dest}")
                log.warning("write %s: refused, its retired %s/%s moved to %s",
                            manifest.write_id, partition, name, dest)
            if names and not fs.glob(folder, "*"):
                fs.delete(folder)


def staged_files(fs: HadoopFs, manifest: Manifest) -> list[str]:
    """Data files Spark wrote to the staging directory, as ``<partition dir>/<name>``.

    One JVM listing; Spark's and Hadoop's own files (``_SUCCESS``, ``.crc``) are skipped.
    """
    pattern = f"{partition_pattern(manifest.keys)}/*"
    return [p for p in fs.glob(f"{manifest.staging}/{DATA}", pattern)
            if not p.rsplit("/", 1)[-1].startswith(("_", "."))]


def _logged_since(publisher: Publisher, info: TableInfo, mark: int,
                  ) -> tuple[set[str], set[str]]:
    """Canonical specs of the table's add-partition and set-done events after ``mark``.

    The manifest records the log position before anything was moved, so
    whatever this write logged before its process died is in this tail.
    """
    parts: set[str] = set()
    dones: set[str] = set()
    cursor = mark
    while True:
        batch = publisher.store.log.events_after(cursor, 1000)
        if not batch:
            return parts, dones
        for event in batch:
            cursor = event.event_id
            if event.topic != info.topic:
                continue
            msg = decode(event.body, {k: str(v) for k, v in event.headers.items()})
            if (msg.db, msg.table) != (info.db, info.name):
                continue
            if isinstance(msg, AddPartitionMessage):
                parts.update(spec.canonical(p) for p in msg.partitions)
            elif isinstance(msg, SetDoneMessage):  # not a PARTITION_LATE of the same spec
                dones.add(msg.spec)


def canonical_set_done(info: TableInfo, raw: str | Mapping[str, object] | None) -> str | None:
    """Validate a set-done spec against the table now, before any data is written."""
    if raw is None:
        return None
    return spec.canonical(Publisher.validate_set_done(info, raw))
