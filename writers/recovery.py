"""Finishing writes whose driver died, and clearing the ones that never committed.

Every staging directory under ``<table>/_pn_staging/`` whose lease has lapsed
is taken over. With a manifest, Spark's job had committed: the write is
completed exactly as its own driver would have (data moved, partitions
announced from the log position the manifest recorded). Without one, the job
never finished: its staged files are deleted and nothing is announced.

A transactional write ends readable at a committed revision: its own, if
its transaction still runs (kept alive while recovery works, then
committed), or else a new one begun by recovery, which then owns everything
the expired revision had tagged (files, replaced partitions, announced
partitions). The new revision is recorded in the staging directory
(``_pn_adopted.<rev>``) before it is used, so a recovery that dies is
continued under the same bookkeeping. A revision aborted on request stays
aborted: an append's data is announced but snapshots skip it (logged as an error);
an overwrite not yet placed is refused and discarded (``AbortedOverwriteError``).
An expired overwrite that placed and that a later write put files into (or replaced
a partition of) since is refused before anything is placed
(``ExpiredOverwriteOvertakenError``, revisions/adoption.py): kept for an operator, the
other stale writes under the location are still completed, then the first refusal is raised.
A write whose caller passed ``revision=`` is completed under that revision
and left for the caller to commit. A write's own recovery of the location before it
writes (``raise_refused=False``) only logs such refusals: the refusal asks for the
partitions to be written again, which a raise there would stop for good.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from partition_notify.publisher import Publisher
from partition_notify.revisions import DEFAULT_FAMILY
from partition_notify.writers.commit import WriteResult, complete
from partition_notify.writers.hadoop import HadoopFs
from partition_notify.writers.layout import ADOPTED, LOCK, MANIFEST, STAGING, Manifest, staging_dir
from partition_notify.writers.lease import Lease

from partition_notify.core.errors import (
    CommitIncompleteError,
    ConflictError,
    ExpiredOverwriteOvertakenError,
    WriteOvertakenError,
)

if TYPE_CHECKING:
    from partition_notify.revisions.files import RevisionFiles
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def recover(publisher: Publisher, fs: HadoopFs, spark: SparkSession, location: str, *,
            stale_after_seconds: float, lease_seconds: float,
            files: RevisionFiles | None = None, raise_refused: bool = True,
            ) -> list[WriteResult]:
    """Complete or discard the writes under ``location`` whose lease was not renewed for
    ``stale_after_seconds``; returns the completed ones. The first refusal
    (:class:`ExpiredOverwriteOvertakenError`) is raised after them, or only logged
    without ``raise_refused``."""
    done: list[WriteResult] = []
    refused: list[ExpiredOverwriteOvertakenError] = []
    for write_id in fs.glob(f"{location}/{STAGING}", "*"):
        staging = staging_dir(location, write_id)
        lease = Lease.claim(fs, f"{staging}/{LOCK}", lease_seconds,
                            stale_after=stale_after_seconds)
        if lease is None:
            continue
        try:
            raw = fs.read(f"{staging}/{MANIFEST}")
            if raw is None:
                log.warning("write %s under %s never committed; deleting its staged files",
                            write_id, location)
                lease.stop()
                fs.delete(staging)
                continue
            try:
                manifest = Manifest.from_json(raw)
            except (ValueError, TypeError) as exc:
                log.error("write %s: unreadable manifest %s/%s (%s); left for an operator",
                          write_id, staging, MANIFEST, exc)
                continue
            log.warning("write %s under %s committed but did not finish; completing it",
                        write_id, location)
            try:
                if files is None or manifest.revision is None or not manifest.owns_revision:
                    done.append(complete(publisher, fs, spark, manifest, lease=lease,
                                         resumed=True))
                else:
                    done.append(_complete_at_committed_revision(publisher, fs, spark, manifest,
                                                                lease, files))
            except WriteOvertakenError as exc:  # discarded (commit.py): not this caller's
                log.error("write %s under %s: %s", write_id, location, exc)
            except ExpiredOverwriteOvertakenError as exc:
                # Kept for an operator; the other stale writes here are still completed.
                exc.add_note(f"write {write_id}: its staging directory {staging} is kept; "
                             "delete it too")
                log.error("write %s under %s: %s", write_id, location, exc)
                refused.append(exc)
        finally:
            lease.stop()
    if refused and raise_refused:
        refused[0].add_note(f"{len(done)} other write(s) under {location} were completed; "
                            f"{len(refused)} refused in all")
        raise refused[0]
    return done


def _complete_at_committed_revision(publisher: Publisher, fs: HadoopFs, spark: SparkSession,
                                    manifest: Manifest, lease: Lease,
                                    files: RevisionFiles) -> WriteResult:
    assert manifest.revision is not None
    table = manifest.revision_table
    adopted = sorted(int(name[len(ADOPTED):])
                     for name in fs.glob(manifest.staging, f"{ADOPTED}*"))
    revisions = [manifest.revision, *adopted]
    state, tx = files.transaction(table, revisions[-1])
    if state in ("committed", "aborted"):
        if state == "aborted":
            log.error("write %s: revision %d of %s was aborted on request; its data is "
                      "announced but snapshots skip it", manifest.write_id, revisions[-1], table)
        return complete(publisher, fs, spark, replace(manifest, revision=revisions[-1]),
                        lease=lease, resumed=True, files=files)
    # Refused before anything is placed: a re-placement at a revision above a later
    # write's would move that write's files aside (ExpiredOverwriteOvertakenError).
    files.check_adoptable(table, revisions if tx is None else revisions[:-1])
    if tx is None:  # expired: a new transaction takes the write over
        tx = files.manager.begin_write_transaction(table, [DEFAULT_FAMILY])
        fs.create(f"{manifest.staging}/{ADOPTED}{tx.revision}", b"", exclusive=True)
        log.warning("write %s: revision %d of %s expired; recovering it as revision %d",
                    manifest.write_id, revisions[-1], table, tx.revision)
        revisions.append(tx.revision)
    live = tx
    table_id = publisher.table(manifest.db, manifest.table).id

    def finish() -> int:
        try:
            return files.adopt(table, revisions[:-1], table_id=table_id, into=live)
        except ConflictError:
            if files.transaction(table, live.revision)[0] != "expired":
                raise
            return files.adopt(table, revisions, table_id=table_id)

    with files.manager.kept_alive(live):
        # Asked again under the placement lease: a write that placed since the check
        # above would have its files moved aside by this placement's retirement.
        return complete(publisher, fs, spark, replace(manifest, revision=live.revision),
                        lease=lease, resumed=True, files=files, finish=finish,
                        adopting=revisions[:-1])


def commit_step_failure(manifest: Manifest, table: str, exc: Exception,
                        settle_refused: bool) -> Exception:
    """What a write raises when its commit step failed after Spark committed its data:
    what ``recover()`` will then do, truly. ``settle_refused``: ``exc`` is the refusal
    of the write's revision by ``settle`` (not a failure to reach the store)."""
    staging = manifest.staging
    if isinstance(exc, ExpiredOverwriteOvertakenError):
        # recover() would refuse it the same way: no promise that it finishes it.
        exc.add_note(
            f"write {manifest.write_id}: its data is placed in the table, its revision not "
            f"committed; its manifest stays in {staging} and recover() refuses it too "
            "(later writes to the table log that and go on). Delete that directory as "
            "well once the partitions are written again")
        return exc
    then = "lets recover() finish it"
    if settle_refused:
        then = ("lets recover() finish placing and announcing it, but its revision was "
                "refused (above) and stays so: snapshots skip its rows")
    return CommitIncompleteError(
        f"write {manifest.write_id} to {table}: Spark committed the data but the commit "
        f"step failed ({type(exc).__name__}: {exc}); the manifest in {staging} {then} — "
        "do not re-run the write", manifest.write_id)
