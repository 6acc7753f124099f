"""``partition-notify serve``: the relay, retention purge and health, on APScheduler."""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from datetime import UTC, datetime
from types import FrameType
from typing import TYPE_CHECKING

from apscheduler.schedulers.background import BackgroundScheduler

from partition_notify.app import App
from partition_notify.errors import PartitionNotifyError
from partition_notify.metrics import Metrics

if TYPE_CHECKING:
    from partition_notify.http.server import HttpServer
    from partition_notify.publisher.relay import Relay

log = logging.getLogger(__name__)
#: SQLite purge: batches short enough that a writer queued behind one waits
#: ~20 ms, and a pause between them longer than a waiting writer's poll
#: (store.engine.LOCK_POLL_SECONDS). bench/core_purge.py --batch-size 2500
#: --pause-ms 5: 1,000,000 rows in 8.3 s, slowest concurrent publish 46 ms.
SQLITE_PURGE_BATCH = 2500
SQLITE_PURGE_PAUSE_SECONDS = 0.005


class Service:
    """The long-running jobs of one ``serve`` process."""

    def __init__(
        self, app: App, metrics: Metrics | None = None, relay: Relay | None = None
    ) -> None:
        self.app = app
        self.metrics = metrics or Metrics()
        self.relay = relay or app.relay
        self.scheduler = BackgroundScheduler(job_defaults={"coalesce": True, "max_instances": 1})
        self.healthy = threading.Event()
        self.metrics.healthy = self.healthy.is_set

    def relay_job(self) -> None:
        before = self.relay.stats.failed_batches
        dead_before = self.relay.stats.dead_lettered
        try:
            sent = self.relay.run_once()
            self.metrics.published.inc(sent)
            count, age = self.app.store.log.relay_lag()
            self.metrics.relay_lag_events.set(count)
            self.metrics.relay_lag_seconds.set(age)
        except PartitionNotifyError as exc:
            log.warning("relay job failed: %s", exc, extra={"pn_event": "relay.job_failed"})
        self.metrics.publish_failures.inc(self.relay.stats.failed_batches - before)
        self.metrics.dead_lettered.inc(self.relay.stats.dead_lettered - dead_before)
        self.metrics.consecutive_failures.set(self.relay.stats.consecutive_failures)

    def purge_job(self) -> None:
        s = self.app.settings
        started = time.monotonic()
        # SQLite has one write lock, so publishers get in between batches;
        # PostgreSQL writers never wait on the purge.
        sqlite = self.app.store.dialect == "sqlite"
        try:
            n = self.app.store.retention.purge_expired(
                batch_size=min(s.purge_batch_size, SQLITE_PURGE_BATCH) if sqlite
                else s.purge_batch_size,
                between_batches=(lambda: time.sleep(SQLITE_PURGE_PAUSE_SECONDS)) if sqlite
                else None,
            )
        except PartitionNotifyError as exc:
            log.warning("retention purge failed: %s", exc)
            return
        self.metrics.purged.inc(n)
        if n:
            log.info("purged %d expired set-done rows in %.2f s", n, time.monotonic() - started)

    def spark_commits_job(self) -> None:
        from partition_notify.writers.commit_spool import scan

        extra = [d for d in self.app.settings.spark_spool_dirs.split(",") if d.strip()]
        try:
            stats = scan(self.app.publisher, extra)
        except PartitionNotifyError as exc:
            log.warning("spark commit pick-up failed: %s", exc)
            return
        if stats.jobs:
            log.info("spark commits picked up: %s", stats,
                     extra={"pn_event": "spark_commit.picked_up"})

    def dataset_expiry_job(self) -> None:
        """Retention of SNAPSHOT datasets; without Spark, only local paths can be deleted."""
        from partition_notify.revisions.datasets import LocalFileSystem

        try:
            removed = self.app.datasets.expire(LocalFileSystem())
        except PartitionNotifyError as exc:
            log.warning("SNAPSHOT dataset expiry failed: %s", exc)
            return
        if removed:
            log.info("SNAPSHOT dataset versions expired: %s", removed,
                     extra={"pn_event": "dataset.expired"})

    def health_job(self) -> None:
        try:
            self.app.store.log.max_event_id()
        except PartitionNotifyError as exc:
            self.healthy.clear()
            self.metrics.up.set(0)
            log.warning("health: store unreachable: %s", exc)
            return
        self.healthy.set()
        self.metrics.up.set(1)

    def start(self) -> None:
        s = self.app.settings
        self.health_job()
        self.scheduler.add_job(
            self.relay_job,
            "interval",
            seconds=s.relay_interval_seconds,
            id="relay",
            next_run_time=_now(),
        )
        self.scheduler.add_job(
            self.purge_job,
            "interval",
            seconds=s.purge_interval_seconds,
            id="purge",
            next_run_time=_now(),
        )
        self.scheduler.add_job(
            self.spark_commits_job,
            "interval",
            seconds=s.spark_spool_interval_seconds,
            id="spark-commits",
            next_run_time=_now(),
        )
        self.scheduler.add_job(
            self.dataset_expiry_job,
            "interval",
            seconds=s.dataset_expiry_interval_seconds,
            id="dataset-expiry",
            next_run_time=_now(),
        )
        self.scheduler.add_job(self.health_job, "interval", seconds=15, id="health")
        from partition_notify.integrations.airflow.push import (
            push_job,  # stdlib only; off without PN_AIRFLOW_URL
        )

        if (push := push_job(self.app.store, self.metrics.push_dead_lettered.inc)) is not None:
            self.scheduler.add_job(push[0], "interval", seconds=push[1], id="airflow-push",
                                   next_run_time=_now())
        self.scheduler.start()

    def stop(self) -> None:
        # The batch in flight finishes (its publish has a deadline) and is
        # marked; no new batch starts. wait=True waits for that.
        self.relay.stopping.set()
        self.scheduler.shutdown(wait=True)
        self.metrics.close()


def _now() -> datetime:
    return datetime.now(UTC)


def _start_http(app: App, service: Service) -> HttpServer | None:
    """The HTTP API (``PN_HTTP_BIND``), imported only when configured."""
    if not app.settings.http_bind:
        return None
    from partition_notify.http.server import HttpServer

    http = HttpServer(app, metrics=service.metrics, healthy=service.healthy.is_set)
    port = http.start()
    http.schedule_purge(service.scheduler, app.settings.purge_interval_seconds)
    log.info("HTTP API on http://%s:%d (docs: /docs)", http.server.config.host, port)
    return http


_STD_ATTRS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and any ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update((k, v) for k, v in record.__dict__.items() if k not in _STD_ATTRS)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def use_json_logs() -> None:
    """Switch the root handlers to :class:`JsonFormatter` (``PN_LOG_FORMAT=json``)."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.INFO)
    for handler in root.handlers:
        handler.setFormatter(JsonFormatter())


def run(app: App, *, stop: threading.Event | None = None) -> None:
    """Run until SIGTERM/SIGINT (or ``stop`` is set), then drain and return."""
    stop = stop or threading.Event()
    if app.settings.log_format == "json":
        use_json_logs()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: draining and stopping", signum)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    service = Service(app)
    if app.settings.metrics_port is not None:
        port = service.metrics.serve(app.settings.metrics_port)
        log.info("metrics on http://127.0.0.1:%d/metrics (health: /healthz)", port)
    service.start()
    from partition_notify.deadlines.jobs import schedule_deadline_checks

    schedule_deadline_checks(service)
    http = _start_http(app, service)
    log.info(
        "serving: store=%s transport=%s relay=%s",
        app.store.dialect,
        type(app.transport).__name__,
        service.relay.owner,
    )
    stop.wait()
    if http is not None:
        http.stop()
    log.info("stopping: waiting for the relay batch in flight")
    service.stop()
    log.info("stopped", extra={"pn_event": "service.stopped"})
