"""``serve``'s housekeeping jobs: retention of what grows, and its size as metrics.

One function per job, each registered by one line in ``Service.start``; the
policy is in docs/reliability.md#retention and store/housekeeping.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from partition_notify.core.errors import PartitionNotifyError
from partition_notify.metrics import Metrics
from partition_notify.store.housekeeping import Horizons

if TYPE_CHECKING:
    from partition_notify.app import App

log = logging.getLogger(__name__)
#: SQLite purge: batches short enough that a writer queued behind one waits
#: ~20 ms, and a pause between them longer than a waiting writer's poll
#: (store.engine.LOCK_POLL_SECONDS). bench/core_purge.py --batch-size 2500
#: --pause-ms 5: 1,000,000 rows in 8.3 s, slowest concurrent publish 46 ms.
SQLITE_PURGE_BATCH = 2500
SQLITE_PURGE_PAUSE_SECONDS = 0.005


def batching(app: App) -> tuple[int, Callable[[], None] | None]:
    """(batch size, pause between batches) of every purge: SQLite has one write
    lock, so publishers get in between batches; PostgreSQL writers never wait."""
    size = app.settings.purge_batch_size
    if app.store.dialect != "sqlite":
        return size, None
    return min(size, SQLITE_PURGE_BATCH), lambda: time.sleep(SQLITE_PURGE_PAUSE_SECONDS)


def horizons(app: App) -> Horizons:
    """The settings' retentions, widened to what other parts still read."""
    s = app.settings
    longest_table = max((t.retention_seconds for t in app.store.catalog.tables()), default=0)
    return Horizons(
        event_log=max(s.event_log_retention_seconds, longest_table, s.deadline_lookback_seconds),
        spark_commits=s.spark_commit_retention_seconds,
        expectation_checks=max(s.expectation_check_retention_seconds,
                               s.deadline_lookback_seconds),
        cursors=s.cursor_retention_seconds,
        deadline_lookback=s.deadline_lookback_seconds,
    )


def housekeeping_job(app: App, metrics: Metrics) -> None:
    """Purge the event log, Spark commits, verdicts, idle cursors, idempotency keys."""
    started = time.monotonic()
    try:
        size, pause = batching(app)
        purged = app.store.housekeeping.purge(horizons(app), batch_size=size,
                                              between_batches=pause)
        counts = app.store.housekeeping.row_counts()
    except PartitionNotifyError as exc:
        log.warning("housekeeping purge failed: %s", exc,
                    extra={"pn_event": "housekeeping.failed"})
        return
    for table in ("events", "spark_commits", "expectation_checks", "cursors", "idempotency"):
        metrics.housekeeping_purged.labels(table).inc(getattr(purged, table))
    for table, n in counts.items():
        metrics.store_rows.labels(table).set(n)
    if purged.total():
        log.info("housekeeping purged %s in %.2f s", purged, time.monotonic() - started,
                 extra={"pn_event": "housekeeping.purged"})


def spool_sweep_job(app: App, metrics: Metrics) -> None:
    """Delete old rejected manifests and abandoned partial writes in spool directories."""
    from partition_notify.writers.commit_spool import spool_dirs, sweep

    extra = [d for d in app.settings.spark_spool_dirs.split(",") if d.strip()]
    try:
        dirs = spool_dirs(app.publisher, extra)
    except PartitionNotifyError as exc:
        log.warning("spool sweep failed: %s", exc)
        return
    swept = sweep(dirs, app.store.clock() - app.settings.spool_retention_seconds)
    metrics.spool_files.labels("rejected").set(swept.rejected)
    metrics.spool_files.labels("partial").set(swept.partial)
    if swept.removed:
        log.info("spool sweep removed %d old file(s)", swept.removed,
                 extra={"pn_event": "spool.swept"})
