"""uvicorn in a thread of ``partition-notify serve``, stopped with a deadline."""

from __future__ import annotations

import asyncio
import logging
import resource
import threading
import time
from collections.abc import Callable

import uvicorn

from partition_notify.app import App
from partition_notify.core.errors import ConfigurationError
from partition_notify.http.app import create_http_app
from partition_notify.http.slow_clients import head_deadline_protocol
from partition_notify.metrics import Metrics

log = logging.getLogger(__name__)
#: How long start() waits for the socket to be bound.
START_TIMEOUT_SECONDS = 30.0
#: Descriptors serve needs besides its HTTP connections: the store's pool, the
#: waker, broker sockets, logs, the metrics endpoint, Spark spool scans.
OTHER_DESCRIPTORS = 256


def fit_descriptor_limit(max_connections: int) -> int:
    """Raise the soft open-files limit to hold ``max_connections`` connections; the limit.

    Soft limits are often 1024 (the hard one much higher): without this the cap
    would never be reached, accept() failing with EMFILE first. Up to the hard
    limit only; short of that, a warning names the cap that cannot be held.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max_connections + OTHER_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-files limit to %d: %s", raised, exc)
        if soft < wanted:
            log.warning("open-files limit %d (hard %d) is below PN_HTTP_MAX_CONNECTIONS=%d "
                        "+ %d: connections past about %d fail to open instead of getting "
                        "503; raise `ulimit -n` or lower the cap", soft, hard,
                        max_connections, OTHER_DESCRIPTORS, soft - OTHER_DESCRIPTORS)
    return int(soft)


def parse_bind(value: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:8080`` for IPv6) as the settings checked it when they loaded
    (``settings_checks.split_bind``: every command refuses a malformed PN_HTTP_BIND, not
    only the ``serve`` that starts this server); port 0 picks a free one."""
    host, _, port = value.strip().rpartition(":")
    return host.strip("[]"), int(port)


class HttpServer:
    def __init__(
        self, app: App, *, metrics: Metrics, healthy: Callable[[], bool]
    ) -> None:
        assert app.settings.http_bind is not None
        host, port = parse_bind(app.settings.http_bind)
        self.api = create_http_app(app, metrics=metrics, healthy=healthy)
        fit_descriptor_limit(app.settings.http_max_connections)
        self.shutdown_timeout = app.settings.http_shutdown_timeout_seconds
        config = uvicorn.Config(
            self.api,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=max(1, int(self.shutdown_timeout)),
            # A Spark driver keeps one connection to serve for its life; commits minutes
            # apart would each open a new one after uvicorn's 5 s default.
            timeout_keep_alive=app.settings.http_keepalive_seconds,
            # http/limits.py caps connections and streams with a problem body instead
            # of this option's plain-text 503.
            limit_concurrency=None,
            # uvicorn's own protocol with a deadline on request heads (http/slow_clients.py).
            http=head_deadline_protocol(app.settings.http_header_timeout_seconds),
            backlog=4096,
        )
        self.server = uvicorn.Server(config)
        connections = self.server.server_state.connections
        self.api.state.pn.open_connections = lambda: len(connections)
        self._thread = threading.Thread(target=self.server.run, name="pn-http", daemon=True)
        self.port = 0

    def start(self) -> int:
        """Serve on a thread; returns the bound port once listening."""
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not self.server.started:
            if not self._thread.is_alive():
                raise ConfigurationError(
                    f"the HTTP API could not start on {self.server.config.host}:"
                    f"{self.server.config.port} (see the log above)"
                )
            if time.monotonic() > deadline:
                raise ConfigurationError("the HTTP API did not start within "
                                         f"{START_TIMEOUT_SECONDS:g} s")
            time.sleep(0.01)
        sockets = [s for srv in self.server.servers for s in srv.sockets]
        self.port = int(sockets[0].getsockname()[1]) if sockets else self.server.config.port
        return self.port

    def stop(self) -> None:
        """End streams and waits, stop accepting, drain requests; give up at the deadline."""
        hub = self.api.state.pn.hub
        loop = hub.loop
        if loop is not None and not loop.is_closed():
            try:
                asyncio.run_coroutine_threadsafe(hub.stop(), loop).result(self.shutdown_timeout)
            except (TimeoutError, RuntimeError) as exc:
                log.warning("HTTP API: ending streams failed: %r", exc)
        self.server.should_exit = True
        self._thread.join(self.shutdown_timeout + 2)
        if self._thread.is_alive():
            log.warning("HTTP API did not stop within %.1f s; forcing", self.shutdown_timeout)
            self.server.force_exit = True
            self._thread.join(5)
