"""The jobs of ``partition-notify serve``: one list, both for ``serve`` and ``serve --once``.

``serve`` schedules every job of :data:`JOBS` on its interval; ``serve --once``
runs each once, in list order. Adding a job is one :class:`Job` entry here: a
``build`` that returns the job's function and interval, or None while the job
is not configured.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from partition_notify.core.errors import PartitionNotifyError

if TYPE_CHECKING:
    from apscheduler.schedulers.base import BaseScheduler
    from prometheus_client import Counter

    from partition_notify.app import App
    from partition_notify.metrics import Metrics
    from partition_notify.publisher.relay import Relay
    from partition_notify.store.housekeeping import BetweenBatches

log = logging.getLogger(__name__)
#: SQLite purge: batches short enough that a writer queued behind one waits
#: ~20 ms, and a pause between them longer than a waiting writer's poll
#: (store.engine.LOCK_POLL_SECONDS). bench/core_purge.py --batch-size 2500
#: --pause-ms 5: 1,000,000 rows in 8.3 s, slowest concurrent publish 46 ms.
SQLITE_PURGE_BATCH = 2500
SQLITE_PURGE_PAUSE_SECONDS = 0.005
#: Run a little after the deadline itself: a set-done committed in the very
#: last moment is then visible.
AFTER_DEADLINE_SECONDS = 0.5
HEALTH_INTERVAL_SECONDS = 15.0

JobFn = Callable[[], None]
#: Job failures remembered for ``serve --once``'s exit line.
MAX_FAILURES = 20


@dataclass(frozen=True)
class Runtime:
    """What the jobs of one ``serve`` process share."""

    app: App
    metrics: Metrics
    relay: Relay
    healthy: threading.Event
    scheduler: BaseScheduler
    #: set when ``serve`` stops: a long job (the manifest pick-up) ends after the item in hand
    stopping: threading.Event
    #: Run once when ``serve`` stops (and after ``serve --once``), after the last job run
    #: ended: what a job holds that others should get at once (the followers' leases).
    on_stop: list[Callable[[], object]] = field(default_factory=list)
    #: The latest job failures, one line each (``serve --once`` exits 1 naming them; a
    #: long-running ``serve`` logs each and runs the job again).
    failures: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_FAILURES))

    def failed(self, what: str, exc: BaseException, event: str | None = None) -> None:
        """A job run failed: the WARNING line ``what: exc``, and the record of it."""
        log.warning("%s: %s", what, exc, extra={"pn_event": event} if event else None)
        self.failures.append(f"{what}: {exc}")


@dataclass(frozen=True)
class Job:
    id: str
    #: The job's function and interval (seconds) for one process; None: not configured.
    build: Callable[[Runtime], tuple[JobFn, float] | None]
    #: "now": first run as soon as the scheduler starts; "inline": once in
    #: ``start()`` before the scheduler runs; "later": after one interval.
    first: Literal["now", "inline", "later"] = "now"


def health(rt: Runtime) -> tuple[JobFn, float]:
    def job() -> None:
        try:
            rt.app.store.log.max_event_id()
        except PartitionNotifyError as exc:
            rt.healthy.clear()
            rt.metrics.up.set(0)
            rt.failed("health: store unreachable", exc)
            return
        rt.healthy.set()
        rt.metrics.up.set(1)

    return job, HEALTH_INTERVAL_SECONDS


def spark_commits(rt: Runtime) -> tuple[JobFn, float]:
    from partition_notify.http.store import HttpStore
    from partition_notify.writers.commit_locations import check_spool_dirs

    s, tokens = rt.app.settings, HttpStore(rt.app.store)
    extra = [d for d in s.spark_spool_dirs.split(",") if d.strip()]
    check_spool_dirs(extra)  # a file is refused, a missing one warned about, once

    def job() -> None:
        from partition_notify.writers.commit_spool import scan

        try:
            # Read per scan: a token revoked since the last one no longer verifies.
            stats = scan(rt.app.publisher, extra, keys=tokens.signing_keys(),
                         default_fs=s.default_fs,
                         deadline_seconds=s.spark_spool_scan_deadline_seconds,
                         should_stop=rt.stopping.is_set)
        except PartitionNotifyError as exc:
            rt.failed("spark commit pick-up failed", exc)
            return
        counter = rt.metrics.spark_commits
        for status, n in (("spooled", stats.announced), ("duplicate", stats.duplicates),
                          ("ignored", stats.ignored), ("rejected", stats.rejected)):
            counter.labels(status=status).inc(n)
        if stats.jobs:
            log.info("spark commits picked up: %s", stats,
                     extra={"pn_event": "spark_commit.picked_up"})

    return job, s.spark_spool_interval_seconds


def relay(rt: Runtime) -> tuple[JobFn, float]:
    def job() -> None:
        m, stats = rt.metrics, rt.relay.stats
        before, dead_before = stats.failed_batches, stats.dead_lettered
        try:
            m.published.inc(rt.relay.run_once())
            count, age = rt.app.store.log.relay_lag()
            m.relay_lag_events.set(count)
            m.relay_lag_seconds.set(age)
        except PartitionNotifyError as exc:
            rt.failed("relay job failed", exc, "relay.job_failed")
        m.publish_failures.inc(stats.failed_batches - before)
        m.dead_lettered.inc(stats.dead_lettered - dead_before)
        m.consecutive_failures.set(stats.consecutive_failures)

    return job, rt.app.settings.relay_interval_seconds


def batching(rt: Runtime) -> tuple[int, BetweenBatches]:
    """(batch size, what runs between batches) of every purge: SQLite has one write
    lock, so publishers get in between batches; PostgreSQL writers never wait.
    Either way a stopping ``serve`` ends the purge there: a backlog of millions of
    rows otherwise held SIGTERM for minutes (tests/serve/test_stop_during_purge.py)."""
    size, stopping = rt.app.settings.purge_batch_size, rt.stopping
    if rt.app.store.dialect != "sqlite":
        return size, lambda: not stopping.is_set()
    return (min(size, SQLITE_PURGE_BATCH),
            lambda: not stopping.wait(SQLITE_PURGE_PAUSE_SECONDS))


def purge(rt: Runtime) -> tuple[JobFn, float]:
    size, pause = batching(rt)

    def job() -> None:
        started = time.monotonic()
        try:
            n = rt.app.store.retention.purge_expired(batch_size=size, between_batches=pause)
        except PartitionNotifyError as exc:
            rt.failed("retention purge failed", exc)
            return
        rt.metrics.purged.inc(n)
        if n:
            log.info("purged %d expired set-done rows in %.2f s", n, time.monotonic() - started)

    return job, rt.app.settings.purge_interval_seconds


def housekeeping(rt: Runtime) -> tuple[JobFn, float]:
    """The event log, idle cursors, Spark commits, verdicts, idempotency keys
    (partition_notify/serve/housekeeping.py), with the retention purge's rhythm."""
    from partition_notify.serve.housekeeping import housekeeping_job

    size, pause = batching(rt)
    return (lambda: housekeeping_job(rt.app, rt.metrics, size, pause, rt.failed),
            rt.app.settings.purge_interval_seconds)


def spool_sweep(rt: Runtime) -> tuple[JobFn, float]:
    """Old rejected manifests and abandoned partial writes in the spool directories."""
    from partition_notify.serve.housekeeping import spool_sweep_job

    return (lambda: spool_sweep_job(rt.app, rt.metrics, rt.failed),
            rt.app.settings.purge_interval_seconds)


def dataset_expiry(rt: Runtime) -> tuple[JobFn, float]:
    """Retention of SNAPSHOT datasets; without Spark, only local paths can be deleted."""

    def job() -> None:
        from partition_notify.revisions.datasets import LocalFileSystem

        try:
            removed = rt.app.datasets.expire(LocalFileSystem())
        except PartitionNotifyError as exc:
            rt.failed("SNAPSHOT dataset expiry failed", exc)
            return
        if removed:
            log.info("SNAPSHOT dataset versions expired: %s", removed,
                     extra={"pn_event": "dataset.expired"})

    return job, rt.app.settings.dataset_expiry_interval_seconds


def deadlines(rt: Runtime) -> tuple[JobFn, float]:
    """The deadline check, on its interval and again just after every next deadline."""
    from partition_notify.deadlines.checker import DeadlineMetrics

    metrics = DeadlineMetrics(rt.metrics.registry)
    checker = rt.app.deadlines.checker(metrics=metrics)

    def job() -> None:
        try:
            report = checker.check()
            if report.late or report.recovered:
                log.info("deadline check: %d late, %d recovered", len(report.late),
                         len(report.recovered))
            metrics.show_open(rt.app.deadlines.store.late_by_table())
            nxt = checker.next_deadline()
        except PartitionNotifyError as exc:
            rt.failed("deadline check failed", exc, "deadline.failed")
            return
        # --once runs without a running scheduler: nothing to plan ahead for.
        if nxt is not None and rt.scheduler.running and not rt.relay.stopping.is_set():
            rt.scheduler.add_job(
                job, "date", id="deadline-next", replace_existing=True,
                run_date=datetime.fromtimestamp(nxt + AFTER_DEADLINE_SECONDS, UTC),
            )

    return job, rt.app.settings.deadline_check_interval_seconds


def rules(rt: Runtime) -> tuple[JobFn, float]:
    """Completeness rules: follow the event log, publish each derived set-done once."""
    evaluator = rt.app.rules.evaluator()
    derived = _rules_counter(rt)

    def job() -> None:
        try:
            report = evaluator.run_once()
            nxt = evaluator.next_due()
        except PartitionNotifyError as exc:
            rt.failed("rule evaluation failed", exc, "rule.failed")
            return
        derived.inc(len(report.derived))
        # A quiet rule's spec falls quiet between two runs: run again just then.
        if nxt is not None and rt.scheduler.running and not rt.relay.stopping.is_set():
            rt.scheduler.add_job(
                job, "date", id="rules-next", replace_existing=True,
                # Never sooner than shortly after now: a spec that cannot fire yet
                # (events still unread) must not make this a busy loop.
                run_date=datetime.fromtimestamp(
                    max(nxt, rt.app.store.clock()) + AFTER_DEADLINE_SECONDS, UTC),
            )

    return job, rt.app.settings.rules_interval_seconds


def _rules_counter(rt: Runtime) -> Counter:
    from prometheus_client import Counter

    return Counter("pn_rules_derived", "Set-dones derived by completeness rules",
                   registry=rt.metrics.registry)


def _follow(rt: Runtime, fmt: str, interval: float) -> tuple[JobFn, float]:
    from partition_notify.writers.lakehouse.follower import Follower

    follower = Follower(rt.app.publisher, fmt,
                        lease_seconds=rt.app.settings.lakehouse_lease_seconds,
                        should_stop=rt.stopping.is_set,
                        read_timeout=rt.app.settings.lakehouse_read_timeout_seconds)
    # A stopped serve lets its tables go: another one takes over at its next run,
    # not when the lease would have lapsed.
    rt.on_stop.append(follower.release)

    def job() -> None:
        try:
            stats = follower.run_once()
        except PartitionNotifyError as exc:  # the store: the next run retries
            rt.failed(f"{fmt} follower failed", exc)
            return
        rt.metrics.lakehouse_commits.labels(fmt).inc(stats.commits)
        rt.metrics.lakehouse_gaps.labels(fmt).inc(stats.gaps)
        rt.metrics.lakehouse_errors.labels(fmt).inc(stats.errors)
        rt.metrics.lakehouse_read_timeouts.labels(fmt).inc(stats.timeouts)
        rt.metrics.lakehouse_stopped.labels(fmt).set(stats.stopped)

    return job, interval


def iceberg_follow(rt: Runtime) -> tuple[JobFn, float]:
    """Tables registered with ``--format iceberg``: each snapshot's partitions."""
    return _follow(rt, "iceberg", rt.app.settings.iceberg_poll_interval_seconds)


def delta_follow(rt: Runtime) -> tuple[JobFn, float]:
    """Tables registered with ``--format delta``: each version's partitions."""
    return _follow(rt, "delta", rt.app.settings.delta_poll_interval_seconds)


def airflow_push(rt: Runtime) -> tuple[JobFn, float] | None:
    # Standard library only; off (None) without PN_AIRFLOW_URL.
    from partition_notify.integrations.airflow.push import push_job

    return push_job(rt.app.store, rt.metrics.push_dead_lettered.inc, rt.failed,
                    rt.metrics.push_unregistered.set)


def push_letters_purge(rt: Runtime) -> tuple[JobFn, float]:
    """Discarded Airflow push dead letters past their retention, with the purge's rhythm.

    On whether or not the push sink is configured: letters discarded while it
    was would otherwise stay forever once it is turned off.
    """
    from partition_notify.store.push_letters import PushLetters

    letters = PushLetters(rt.app.store)
    size, pause = batching(rt)

    def job() -> None:
        try:
            n = letters.purge(batch_size=size, between_batches=pause)
        except PartitionNotifyError as exc:
            rt.failed("push dead-letter purge failed", exc)
            return
        if n:
            log.info("purged %d Airflow push dead letter(s): discarded, or their event gone", n)

    return job, rt.app.settings.purge_interval_seconds


#: Every job of ``serve``, in the order ``serve --once`` runs them: the health
#: check first, Spark, Iceberg and Delta commits picked up before the relay sends
#: their events; rules before deadlines, so a derived set-done counts at a deadline.
JOBS: tuple[Job, ...] = (
    Job("health", health, first="inline"),
    Job("spark-commits", spark_commits),
    Job("iceberg-follow", iceberg_follow),
    Job("delta-follow", delta_follow),
    Job("relay", relay),
    Job("purge", purge),
    Job("housekeeping", housekeeping),
    Job("spool-sweep", spool_sweep),
    Job("dataset-expiry", dataset_expiry),
    Job("rules", rules),
    Job("deadlines", deadlines),
    Job("airflow-push", airflow_push),
    Job("airflow-push-letters-purge", push_letters_purge, first="later"),
)
