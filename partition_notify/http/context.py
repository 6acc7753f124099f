"""What every route reaches through ``request.app.state.pn``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fastapi import Request
from prometheus_client import Counter, Gauge

from partition_notify.app import App
from partition_notify.http.hub import EventHub
from partition_notify.http.store import HttpStore
from partition_notify.metrics import Metrics
from partition_notify.settings import Settings
from partition_notify.store.idempotency import IdempotencyKeys


@dataclass
class HttpContext:
    app: App
    http_store: HttpStore
    hub: EventHub
    metrics: Metrics
    healthy: Callable[[], bool]
    waits: Gauge = field(init=False)
    streams: Gauge = field(init=False)
    #: Requests refused over PN_HTTP_MAX_CONNECTIONS / PN_HTTP_MAX_STREAMS (http/limits.py).
    refused: Counter = field(init=False)
    #: Open connections, as the server counts them (set by http/server.py; None elsewhere).
    open_connections: Callable[[], int] | None = None
    #: Idempotency keys live in the store: the publisher's in-process keys share the table.
    idempotency: IdempotencyKeys = field(init=False)

    def __post_init__(self) -> None:
        r = self.metrics.registry
        self.waits = Gauge("pn_http_waits", "HTTP long-polls in progress", registry=r)
        self.streams = Gauge("pn_http_streams", "HTTP SSE streams open", registry=r)
        self.refused = Counter("pn_http_refused", "HTTP requests refused over a cap",
                               ["cap"], registry=r)
        self.idempotency = IdempotencyKeys(self.app.store)

    @property
    def settings(self) -> Settings:
        return self.app.settings


async def context(request: Request) -> HttpContext:
    # async: FastAPI runs a plain-def dependency on a worker thread, a hop and back
    # per request for one attribute read.
    ctx: HttpContext = request.app.state.pn
    return ctx
