"""``partition-notify serve``: the jobs of :mod:`partition_notify.serve.jobs` on APScheduler,
the HTTP API when configured, JSON logs, and a drain on SIGTERM."""

from __future__ import annotations

import gc
import json
import logging
import signal
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from types import FrameType
from typing import TYPE_CHECKING

from apscheduler.schedulers.background import BackgroundScheduler

from partition_notify.app import App
from partition_notify.core.errors import ConfigurationError, PartitionNotifyError
from partition_notify.core.redact import redact_url
from partition_notify.metrics import Metrics
from partition_notify.serve.jobs import JOBS, Job, JobFn, Runtime
from partition_notify.store.engine import sqlite_access, sqlite_access_problem, sqlite_file
from partition_notify.store.log_headers import damaged_events, unverifiable_events

if TYPE_CHECKING:
    from partition_notify.http.server import HttpServer
    from partition_notify.publisher.relay import Relay

log = logging.getLogger(__name__)


class Service:
    """The long-running jobs of one ``serve`` process: :data:`~partition_notify.serve.jobs.JOBS`."""

    def __init__(
        self, app: App, metrics: Metrics | None = None, relay: Relay | None = None,
        jobs: Sequence[Job] = JOBS,
    ) -> None:
        self.app = app
        self.metrics = metrics or Metrics()
        self.metrics.log_damaged = damaged_events
        self.metrics.log_unverifiable = unverifiable_events
        self.relay = relay or app.relay
        # misfire_grace_time None: a run late because the machine was busy still runs
        # (coalesced into one) instead of being skipped with a WARNING: an hourly job
        # skipped waits another hour, and a quiet serve must stay quiet under load.
        self.scheduler = BackgroundScheduler(job_defaults={
            "coalesce": True, "max_instances": 1, "misfire_grace_time": None})
        self.healthy = threading.Event()
        self.stopping = threading.Event()
        self.metrics.healthy = self.healthy.is_set
        self.jobs = tuple(jobs)
        self.runtime = Runtime(
            app, self.metrics, self.relay, self.healthy, self.scheduler, self.stopping)

    def _built(self) -> list[tuple[Job, JobFn, float]]:
        return [(job, *built) for job in self.jobs if (built := job.build(self.runtime))]

    def run_once(self) -> list[str]:
        """``serve --once``: every configured job once, in list order, then the stop hooks;
        returns what failed (one line each, as logged)."""
        for _job, fn, _seconds in self._built():
            fn()
        self._run_stop_hooks()
        return list(self.runtime.failures)

    def start(self) -> None:
        for job, fn, seconds in self._built():
            first: dict[str, object] = {}
            if job.first == "inline":
                fn()
            elif job.first == "now":
                first["next_run_time"] = datetime.now(UTC)
            self.scheduler.add_job(fn, "interval", seconds=seconds, id=job.id, **first)
        self.scheduler.start()

    def stop(self) -> None:
        # The batch in flight finishes (its publish has a deadline) and is
        # marked; no new batch starts. wait=True waits for that.
        self.relay.stopping.set()
        self.stopping.set()   # a manifest pick-up stops after the file in hand
        self.scheduler.shutdown(wait=True)
        self._run_stop_hooks()
        self.metrics.close()

    def _run_stop_hooks(self) -> None:
        """After the last job run: each hook once; one failing does not skip the others."""
        hooks, self.runtime.on_stop[:] = list(self.runtime.on_stop), []
        for hook in hooks:
            try:
                hook()
            except PartitionNotifyError as exc:  # the store is down: the leases lapse instead
                self.runtime.failed(
                    f"stop hook {getattr(hook, '__qualname__', hook)} failed", exc)


def _start_http(app: App, service: Service) -> HttpServer | None:
    """The HTTP API (``PN_HTTP_BIND``), imported only when configured."""
    if not app.settings.http_bind:
        return None
    from partition_notify.http.server import HttpServer

    http = HttpServer(app, metrics=service.metrics, healthy=service.healthy.is_set)
    port = http.start()
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


#: Libraries whose INFO lines come per job run (APScheduler: two a second for
#: the relay alone, >170k a day) or per migration step: DEBUG only.
CHATTY_LOGGERS = ("apscheduler", "alembic")
TEXT_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def configure_logging(level: str, log_format: str) -> None:
    """``PN_LOG_LEVEL`` and ``PN_LOG_FORMAT`` for a ``serve`` process."""
    number = logging.getLevelNamesMapping()[level]
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(format=TEXT_LOG_FORMAT)
    root.setLevel(number)
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(max(number, logging.WARNING)
                                         if number > logging.DEBUG else logging.DEBUG)
    # "skipped: maximum number of running instances reached": a relay run
    # longer than its interval, already visible as relay lag, once a second.
    logging.getLogger("apscheduler.scheduler").setLevel(
        logging.DEBUG if number <= logging.DEBUG else max(number, logging.ERROR))
    if log_format == "json":
        use_json_logs()


def use_json_logs() -> None:
    """Switch the root handlers to :class:`JsonFormatter` (``PN_LOG_FORMAT=json``)."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.INFO)
    for handler in root.handlers:
        handler.setFormatter(JsonFormatter())


#: How long the main thread sleeps between checks for a signal: the longest a
#: SIGTERM that the kernel handed to another thread waits for its handler.
SIGNAL_CHECK_SECONDS = 0.25


def _wait_for(stop: threading.Event) -> None:
    """Wait for ``stop`` in slices. Python runs signal handlers in the main thread
    only when it runs bytecode; a SIGTERM delivered to the metrics or scheduler
    thread does not interrupt an untimed wait, which then never returned."""
    while not stop.wait(SIGNAL_CHECK_SECONDS):
        pass


def require_writable_store(url: str) -> None:
    """serve writes the store (relay, leases, purges, every HTTP write): on a SQLite
    file it may only read it would report ready and fail every write with a 503."""
    path = sqlite_file(url)
    problem = "" if path is None else sqlite_access_problem(path)
    if path is not None and sqlite_access(url) != "rw":
        problem = "its URL opens it read-only (mode=ro or immutable=1)"
    if problem:
        raise ConfigurationError(f"store {redact_url(url)}: {problem}; serve writes the store")


def run(app: App, *, stop: threading.Event | None = None) -> None:
    """Run until SIGTERM/SIGINT (or ``stop`` is set), then drain and return."""
    require_writable_store(app.settings.store_url)
    stop = stop or threading.Event()
    configure_logging(app.settings.log_level, app.settings.log_format)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: draining and stopping", signum)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    service = Service(app)
    if app.settings.metrics_port is not None:
        bind = app.settings.metrics_bind
        port = service.metrics.serve(app.settings.metrics_port, bind)
        log.info("metrics on http://%s:%d/metrics (health: /healthz)", bind, port)
    service.start()
    http = _start_http(app, service)
    # What start-up built lives as long as the process: out of the collector's full
    # passes, which otherwise walk it every few requests (a /ui board render's p95
    # CPU was 164 ms against 42 ms p50, 49 ms p95 with the collector off).
    gc.collect()
    gc.freeze()
    # Which store, by URL and (SQLite) absolute file: a CLI in another directory
    # with the relative default would use another one.
    path = sqlite_file(app.settings.store_url)
    log.info(
        "serving: store=%s transport=%s relay=%s",
        redact_url(app.settings.store_url) + ("" if path is None else f" (file {path})"),
        type(app.transport).__name__,
        service.relay.owner,
    )
    _wait_for(stop)
    if http is not None:
        http.stop()
    log.info("stopping: waiting for the relay batch in flight")
    service.stop()
    log.info("stopped", extra={"pn_event": "service.stopped"})
