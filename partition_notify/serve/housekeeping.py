"""``serve``'s housekeeping: retention of everything that grows, and its size as metrics.

Each feature purges its own table (the store layer imports none of them):
the shared log (``store.housekeeping``: events, idle cursors), Spark commit
records and the HTTP route's refusals (``writers``), deadline verdicts
(``deadlines``), idempotency keys (``http``) and completeness-rule inputs and
firings (``rules``), aborted revisions and the data files no snapshot needs
(``revisions``: retired by an overwrite, or an aborted write's). This module
wires them into the two jobs of :data:`~partition_notify.serve.jobs.JOBS`
(``housekeeping``, ``spool-sweep``);
the policy is in docs/reliability.md#retention-nothing-grows-forever.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import astuple, dataclass, fields
from functools import partial
from typing import TYPE_CHECKING

from partition_notify.core.errors import NotFoundError, PartitionNotifyError, ValidationError
from partition_notify.deadlines.schema import ExpectationCheckRow
from partition_notify.deadlines.store import DeadlineStore
from partition_notify.revisions.files import RevisionFiles
from partition_notify.revisions.retention import adopt_placed, purge_aborted
from partition_notify.revisions.schema import RevisionTxnRow
from partition_notify.revisions.vacuum import FileRemover, LocalFiles, Roots, remove_retired
from partition_notify.rules.schema import RuleFiringRow, RuleInputRow
from partition_notify.rules.store import RuleStore
from partition_notify.store.housekeeping import BetweenBatches
from partition_notify.store.idempotency import IdempotencyKeys
from partition_notify.store.idempotency_schema import IdempotencyRow
from partition_notify.store.uow import UnitOfWork
from partition_notify.writers.commit_manifest import purge_spark_commits
from partition_notify.writers.commit_refusals import CommitRefusals, SparkCommitRefusalRow
from partition_notify.writers.commit_schema import SparkCommitRow
from partition_notify.writers.commit_spool import local_dir

if TYPE_CHECKING:
    from partition_notify.app import App
    from partition_notify.metrics import Metrics

log = logging.getLogger(__name__)
#: Tables whose row counts ``serve`` exports (pn_store_rows{table=...}).
COUNTED_TABLES = (
    "pn_events", "pn_set_done", "pn_partitions", SparkCommitRow.__tablename__,
    ExpectationCheckRow.__tablename__, "pn_consumer_cursors", IdempotencyRow.__tablename__,
    RuleInputRow.__tablename__, RuleFiringRow.__tablename__,
    SparkCommitRefusalRow.__tablename__, RevisionTxnRow.__tablename__,
)
Pause = BetweenBatches | None


@dataclass(slots=True)
class Purged:
    """Rows one housekeeping run deleted, per kind (the pn_housekeeping_purged labels)."""

    events: int = 0
    spark_commits: int = 0
    spark_commit_refusals: int = 0
    expectation_checks: int = 0
    cursors: int = 0
    idempotency: int = 0
    rule_state: int = 0
    revision_txns: int = 0
    #: Data files deleted: retired by an overwrite past their retention, or an aborted write's.
    revision_files: int = 0

    def total(self) -> int:
        return sum(astuple(self))


def event_log_horizon(app: App) -> float:
    """How long published events stay: the setting, widened to what other parts
    still read (a table's retention: its set-done replays; the deadline look-back)."""
    s = app.settings
    longest_table = app.store.catalog.longest_retention()
    return max(s.event_log_retention_seconds, longest_table, s.deadline_lookback_seconds)


def purge_all(app: App, size: int, pause: Pause) -> Purged:
    """Every purge once, oldest first in batches of ``size`` with ``pause`` between."""
    s, store = app.settings, app.store
    now = store.clock()
    out = Purged()
    # Idle cursors first: a consumer gone for good must not hold the log.
    out.cursors = store.housekeeping.purge_cursors(now - s.cursor_retention_seconds)
    # A rule's cursor holds the log like a consumer's: a lagging rule must not
    # lose its inputs; one stuck past the cursor retention holds it no longer.
    out.events = store.housekeeping.purge_events(
        now - event_log_horizon(app), batch_size=size, between_batches=pause,
        held_from=RuleStore(store).lowest_cursor(),
        hold_until=now - s.cursor_retention_seconds)
    out.spark_commits = purge_spark_commits(
        store, now - s.spark_commit_retention_seconds, batch_size=size, between_batches=pause)
    out.spark_commit_refusals = CommitRefusals(store).purge(
        now - s.spark_commit_retention_seconds, batch_size=size, between_batches=pause)
    out.expectation_checks = DeadlineStore(store).purge_checks(
        now - max(s.expectation_check_retention_seconds, s.deadline_lookback_seconds),
        now - s.deadline_lookback_seconds, batch_size=size, between_batches=pause)
    # Whether or not this process serves the HTTP API: another one may have written them.
    out.idempotency = IdempotencyKeys(store).purge(batch_size=size, between_batches=pause)
    out.rule_state = RuleStore(store).purge(now, batch_size=size, between_batches=pause)
    write_uow = partial(UnitOfWork, store.engine, write=True)
    remover = FileRemover(local_roots(app))
    remove_retired(write_uow, remover, now, now - s.retired_file_retention_seconds,
                   batch_size=size, between_batches=pause)
    # A placed overwrite that expired unrecovered is committed, not purged: its files
    # are the partitions' data, its rows the record of the ones it moved aside.
    adoptions = adopt_placed(RevisionFiles(app.revisions), now - s.revision_abort_retention_seconds)
    if adoptions.adopted or adoptions.kept:  # each one is logged too, adopted or kept
        log.info("housekeeping committed %d expired placed overwrite(s); %d kept",
                 adoptions.adopted, adoptions.kept, extra={"pn_event": "revision_purge.adopt_pass"})
    # An aborted write's files go just before its rows (the record of which they are).
    out.revision_txns = purge_aborted(
        write_uow, now - s.revision_abort_retention_seconds, batch_size=size,
        between_batches=pause, remover=remover, now=now)
    out.revision_files = remover.removed
    return out


def local_roots(app: App) -> Roots:
    """A revision table's location as a local directory; None for a name the catalog
    does not know (a SNAPSHOT dataset's) or a location elsewhere (hdfs://, s3a://):
    ``serve`` deletes no file there (a Spark job does: writers/vacuum.py)."""
    def root(table: str) -> LocalFiles | None:
        db, _, name = table.partition(".")
        try:
            location = app.store.catalog.get_table(db, name).location
        except (NotFoundError, ValidationError):
            return None
        path = local_dir(location, app.settings.default_fs) if location else None
        return None if path is None else LocalFiles(path)
    return root


#: How a job reports a failed run: ``Runtime.failed``, the one place that writes the
#: WARNING line and keeps the record ``serve --once`` exits on.
Failed = Callable[[str, BaseException, "str | None"], None]


def housekeeping_job(app: App, metrics: Metrics, size: int, pause: Pause,
                     failed: Failed) -> None:
    """Purge the event log, idle cursors, Spark commits, verdicts and idempotency keys;
    export the table sizes."""
    started = time.monotonic()
    try:
        purged = purge_all(app, size, pause)
        counts = app.store.housekeeping.row_counts(COUNTED_TABLES)
    except PartitionNotifyError as exc:
        failed("housekeeping purge failed", exc, "housekeeping.failed")
        return
    for f in fields(purged):
        metrics.housekeeping_purged.labels(f.name).inc(getattr(purged, f.name))
    for table, n in counts.items():
        metrics.store_rows.labels(table).set(n)
    if purged.total():
        log.info("housekeeping purged %s in %.2f s", purged, time.monotonic() - started,
                 extra={"pn_event": "housekeeping.purged"})


def spool_sweep_job(app: App, metrics: Metrics, failed: Failed) -> None:
    """Delete old rejected manifests and abandoned partial writes in spool directories."""
    from partition_notify.writers.commit_spool import spool_dirs, sweep

    extra = [d for d in app.settings.spark_spool_dirs.split(",") if d.strip()]
    try:
        dirs = [d.path for d in spool_dirs(app.publisher, extra, app.settings.default_fs)]
    except PartitionNotifyError as exc:
        failed("spool sweep failed", exc, None)
        return
    swept = sweep(dirs, app.store.clock() - app.settings.spool_retention_seconds)
    metrics.spool_files.labels("rejected").set(swept.rejected)
    metrics.spool_files.labels("partial").set(swept.partial)
    if swept.removed:
        log.info("spool sweep removed %d old file(s)", swept.removed,
                 extra={"pn_event": "spool.swept"})
