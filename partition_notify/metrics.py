"""Prometheus metrics, on a registry of their own so tests can build many.

The HTTP endpoint serves ``/metrics`` (and every other path, like
``prometheus_client.start_http_server``) plus ``/healthz``: 200 while the
last health check passed, 503 otherwise.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any, Protocol
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from partition_notify.core.errors import ConfigurationError

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment


#: How long the endpoint waits for each read of a request (and write of its answer):
#: a scrape's request arrives in milliseconds; a connection that sends nothing (a
#: half-open socket, a probe that never closes) held its thread for ever.
METRICS_READ_TIMEOUT_SECONDS = 10.0
#: Connections served at once; one more is closed unanswered (each holds a thread).
MAX_METRICS_CONNECTIONS = 64
#: The ``status`` label values of ``pn_spark_commits_total``.
SPARK_COMMIT_STATUSES = ("announced", "spooled", "duplicate", "ignored", "rejected")


class _Stats(Protocol):
    received: int
    malformed: int
    gaps: int
    missing_events: int
    reconnects: int
    duplicates: int
    filled: int
    fill_errors: int
    foreign: int
    coalesced: int
    inbox_high_water: int


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.published = Counter("pn_relay_published", "Events published by the relay", registry=r)
        self.publish_failures = Counter(
            "pn_relay_failed_batches",
            "Relay batches the broker refused or did not confirm",
            registry=r,
        )
        self.consecutive_failures = Gauge(
            "pn_relay_consecutive_failures",
            "Relay batches failed in a row (0 once one succeeds)",
            registry=r,
        )
        self.dead_lettered = Counter(
            "pn_relay_dead_lettered",
            "Events the broker refused for good, quarantined after the relay's attempts",
            registry=r,
        )
        self.push_dead_lettered = Counter(
            "pn_airflow_push_dead_lettered",
            "Set-dones Airflow refused for good (or could not confirm), quarantined by the "
            "push sink",
            registry=r,
        )
        self.push_unregistered = Gauge(
            "pn_airflow_push_unregistered_tables",
            "Tables PN_AIRFLOW_ASSETS maps that are not registered (nothing pushed for them)",
            registry=r,
        )
        self.relay_lag_events = Gauge(
            "pn_relay_lag_events", "Logged events not yet published", registry=r
        )
        self.relay_lag_seconds = Gauge(
            "pn_relay_lag_seconds", "Age of the oldest unpublished event", registry=r
        )
        self.purged = Counter("pn_retention_purged", "Expired set-done rows purged", registry=r)
        self.housekeeping_purged = Counter(
            "pn_housekeeping_purged", "Rows purged by housekeeping, per table",
            ["table"], registry=r)
        self.store_rows = Gauge(
            "pn_store_rows", "Rows per store table (at the last housekeeping run)",
            ["table"], registry=r)
        self.spool_files = Gauge(
            "pn_spool_files", "Rejected manifests / partial writes in spool directories",
            ["kind"], registry=r)
        self.up = Gauge(
            "pn_store_up", "1 when the store answered the last health check", registry=r
        )
        self.spark_commits = Counter(
            "pn_spark_commits",
            "Spark commit manifests by outcome: announced (HTTP or CLI), spooled (announced "
            "from a spool), duplicate, ignored (no registered table), rejected",
            ["status"], registry=r,
        )
        for status in SPARK_COMMIT_STATUSES:
            self.spark_commits.labels(status=status)
        self.lakehouse_commits = Counter(
            "pn_lakehouse_commits", "Iceberg snapshots / Delta versions followed",
            ["format"], registry=r)
        self.lakehouse_gaps = Counter(
            "pn_lakehouse_gaps",
            "Commits expired or cleaned before the follower read them (not announced)",
            ["format"], registry=r)
        self.lakehouse_read_timeouts = Counter(
            "pn_lakehouse_read_timeouts",
            "Reads of a followed table (pyiceberg, delta-rs) past PN_LAKEHOUSE_READ_TIMEOUT_"
            "SECONDS; the table is skipped until the read returns", ["format"], registry=r)
        self.lakehouse_stopped = Gauge(
            "pn_lakehouse_stopped",
            "Followed tables stopped on a commit they cannot announce, or unable to load "
            "the table at their cursor, at the last run: each waits for a repair or "
            "`partition-notify lakehouse skip`", ["format"], registry=r)
        self.lakehouse_errors = Counter(
            "pn_lakehouse_errors", "Followed tables whose run failed (retried next run)",
            ["format"], registry=r)
        self._server: WSGIServer | None = None
        self.healthy: Callable[[], bool] = lambda: True
        #: The store's count (store/log_headers.py); serve sets it (metrics imports only core).
        self.log_damaged: Callable[[], int] = lambda: 0
        r.register(CountCollector(
            "pn_log_damaged_headers", "Logged events whose headers were damaged (not a JSON "
            "object) and rebuilt from their bodies; each is logged at ERROR",
            lambda: self.log_damaged()))
        self.log_unverifiable: Callable[[], int] = lambda: 0
        r.register(CountCollector(
            "pn_log_unverifiable_events", "Of those, events whose body does not decode "
            "either: never sent (a relay dead-letters them), skipped by every reader",
            lambda: self.log_unverifiable()))

    def track_subscriber(self, stats: _Stats, name: str = "default") -> None:
        """Export a subscriber's counters (gaps detected, malformed, ...)."""
        self.registry.register(_SubscriberCollector(stats, name))

    def serve(self, port: int, addr: str = "127.0.0.1", *,
              read_timeout: float = METRICS_READ_TIMEOUT_SECONDS,
              max_connections: int = MAX_METRICS_CONNECTIONS) -> int:
        """Serve /metrics and /healthz on a daemon thread; returns the bound port."""
        metrics_app = make_wsgi_app(self.registry)

        def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
            if environ.get("PATH_INFO") == "/healthz":
                ok = self.healthy()
                start_response(
                    "200 OK" if ok else "503 Service Unavailable",
                    [("Content-Type", "text/plain; charset=utf-8")],
                )
                return [b"ok\n" if ok else b"unhealthy\n"]
            body: Iterable[bytes] = metrics_app(environ, start_response)
            return body

        try:
            handler = type("_TimedHandler", (_QuietHandler,), {"timeout": read_timeout})
            server = make_server(addr, port, app, _ThreadingServer, handler_class=handler)
            server.slots = threading.BoundedSemaphore(max_connections)
        except OSError as exc:  # busy port, unknown address: one line, not a traceback
            raise ConfigurationError(
                f"PN_METRICS_PORT={port} on PN_METRICS_BIND={addr!r}: cannot listen "
                f"({exc.strerror or exc}); expected a free port on a local address"
            ) from None
        self._server = server
        threading.Thread(target=server.serve_forever, name="pn-metrics", daemon=True).start()
        return int(server.server_address[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    """A thread per connection, at most ``slots`` at once (:data:`MAX_METRICS_CONNECTIONS`)."""

    daemon_threads = True
    # The handler's read timeout ends an idle connection; this bounds how many
    # wait at once (threads and their stacks), whatever opens them.
    slots = threading.BoundedSemaphore(MAX_METRICS_CONNECTIONS)  # serve() sets its own

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)  # full: closed unanswered, the client retries
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that timed out or left is no error of ours: no traceback on stderr."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Scrapes every few seconds would flood stderr."""


class CountCollector(Collector):
    """A counter another layer keeps (metrics imports only core): read at each scrape."""

    def __init__(self, name: str, doc: str, read: Callable[[], int]) -> None:
        self.name, self.doc, self.read = name, doc, read

    def collect(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily(self.name, self.doc, value=float(self.read()))


class _SubscriberCollector(Collector):
    _FIELDS = (
        ("received", "Messages received from the bus"),
        ("malformed", "Messages skipped as malformed"),
        ("gaps", "Gaps in topic sequence numbers detected"),
        ("missing_events", "Events missing inside detected gaps"),
        ("reconnects", "Reconnects after which missed messages were read from the event log"),
        ("duplicates", "Repeats dropped by topic sequence number"),
        ("filled", "Messages read from the event log to fill a jump or a reconnect"),
        ("fill_errors", "Failed reads of the event log while filling or verifying (retried)"),
        ("foreign", "Broker messages the event log does not hold (dropped unless "
                    "PN_FOREIGN_MESSAGES=deliver)"),
        ("coalesced", "Live messages dropped while the subscriber's inbox was full, read "
                      "from the event log instead"),
    )

    def __init__(self, stats: _Stats, name: str) -> None:
        self.stats = stats
        self.name = name

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        for field, doc in self._FIELDS:
            family = CounterMetricFamily(f"pn_subscriber_{field}", doc, labels=["subscriber"])
            family.add_metric([self.name], float(getattr(self.stats, field)))
            yield family
        high = GaugeMetricFamily("pn_subscriber_inbox_high_water",
                                 "The most items the subscriber's inbox held at once (its "
                                 "bound is Subscriber(max_inbox=...), plus a recheck per topic)",
                                 labels=["subscriber"])
        high.add_metric([self.name], float(self.stats.inbox_high_water))
        yield high
