"""Caps on open connections and on long-lived requests, answered with a 503 problem.

Every open connection holds a file descriptor and some memory, idle keep-alive
ones for PN_HTTP_KEEPALIVE_SECONDS too, unfinished requests until their head
or body deadline (http/slow_clients.py); SSE streams and long-polls hold theirs
for minutes. Without a cap, enough clients (or one misbehaving) exhaust the
process. Two caps, checked when a request arrives:

- PN_HTTP_MAX_STREAMS: streams and long-polls at once. Below the connection
  cap, so consumers waiting for data never take every connection from writes
  (a Spark driver's commit), reads and health checks.
- PN_HTTP_MAX_CONNECTIONS: open connections (from uvicorn's own count, the
  current one included) and, where the server does not tell, requests in
  progress. The refusal closes the connection, so it frees what it took.

uvicorn's ``limit_concurrency`` would answer a plain-text 503 on its own; the
API answers every error with its problem document, so the caps are here.
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Receive, Scope, Send

from partition_notify.http.context import HttpContext
from partition_notify.http.problems import problem_response

#: Requests that stay open until data arrives or a timeout: SSE streams and long-polls.
LONG_LIVED = re.compile(r"/v1/tables/[^/]+/(stream|wait)")
#: A refused client may retry this much later; connections free within seconds
#: (a request's end, a stream's client leaving) or at the keep-alive timeout.
RETRY_AFTER_SECONDS = 2


class ConnectionCaps:
    """ASGI middleware applying both caps; counts run on the event loop (no lock)."""

    def __init__(self, app: ASGIApp, *, ctx: HttpContext) -> None:
        self.app = app
        self.ctx = ctx
        self.max_connections = ctx.settings.http_max_connections
        self.max_streams = ctx.settings.stream_cap
        self.requests = 0
        self.streams = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        long_lived = scope["method"] == "GET" and LONG_LIVED.fullmatch(scope["path"]) is not None
        refusal = self._refusal(long_lived)
        if refusal is not None:
            self.ctx.refused.labels(refusal[0]).inc()
            await self._refuse(scope, receive, send, *refusal)
            return
        self.requests += 1
        self.streams += long_lived
        try:
            await self.app(scope, receive, send)
        finally:
            self.requests -= 1
            self.streams -= long_lived

    def _refusal(self, long_lived: bool) -> tuple[str, str] | None:
        """(slug, detail) when a cap is reached, else None."""
        if long_lived and self.streams >= self.max_streams:
            return ("too-many-streams",
                    f"{self.streams} SSE streams and long-polls are open, the server's "
                    f"maximum (PN_HTTP_MAX_STREAMS={self.max_streams}); retry later")
        count = self.ctx.open_connections  # None: not under serve's uvicorn
        connections = count() if count is not None else self.requests + 1
        if connections > self.max_connections or self.requests >= self.max_connections:
            return ("too-many-connections",
                    f"{max(connections, self.requests + 1)} connections are open, more than "
                    f"the server's maximum (PN_HTTP_MAX_CONNECTIONS={self.max_connections}); "
                    "retry later")
        return None

    async def _refuse(self, scope: Scope, receive: Receive, send: Send,
                      slug: str, detail: str) -> None:
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
        if slug == "too-many-connections":
            headers["Connection"] = "close"  # frees the descriptor this one holds
        response = problem_response(503, slug, "Service unavailable", detail,
                                    headers=headers, instance=scope.get("path"))
        await response(scope, receive, send)
