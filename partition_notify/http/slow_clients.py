"""Deadlines for reading a request's head and body, so slow clients cannot hold connections.

Every open connection counts toward PN_HTTP_MAX_CONNECTIONS (http/limits.py).
uvicorn arms its keep-alive timer only after a response and cancels it on the
next byte, so a request head that never ends, or a body short of its
Content-Length, held its connection for ever: a few sockets took the whole
cap, /healthz included, without a token. Two deadlines close them:

- PN_HTTP_HEADER_TIMEOUT_SECONDS: from a connection's accept (its first
  request) or from the first byte of each next request, until the head is
  parsed. Past it the connection is closed without an answer (nothing was
  understood to answer). A subclass of uvicorn's HTTP protocol holds the timer.
- PN_HTTP_BODY_TIMEOUT_SECONDS: from the request's start until its declared
  body has arrived. Past it: 408 problem, the connection closed, the route
  never run (nothing stored). ASGI middleware bounds ``receive``; once the
  body is complete, ``receive`` is the wait for ``http.disconnect`` and is
  left unbounded, so SSE streams and long-polls live on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import h11
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.auto import AutoHTTPProtocol
from uvicorn.protocols.http.h11_impl import H11Protocol

from partition_notify.http.problems import problem_response
from partition_notify.settings import Settings

#: PN_HTTP_HEADER_TIMEOUT_SECONDS's default, for the protocol classes used as they are.
DEFAULT_HEAD_SECONDS: float = Settings.model_fields["http_header_timeout_seconds"].default


class _HeadTimer:
    """One pending deadline at a time; arming an armed timer keeps the earlier deadline."""

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float,
                 expire: Callable[[], None]) -> None:
        self.loop = loop
        self.seconds = seconds
        self.expire = expire
        self.handle: asyncio.TimerHandle | None = None

    def arm(self) -> None:
        if self.handle is None:
            self.handle = self.loop.call_later(self.seconds, self._fire)

    def disarm(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None

    def _fire(self) -> None:
        self.handle = None
        self.expire()


def _close(transport: asyncio.BaseTransport | None) -> None:
    if transport is not None and not transport.is_closing():
        transport.close()


class _HeadDeadline(asyncio.Protocol):
    """What both parsers' protocols share: the timer, armed at accept (a connection
    that never sends a byte is closed too) and dropped with the connection. Listed
    before uvicorn's protocol class, whose ``loop`` and ``transport`` it uses."""

    head_timeout_seconds = DEFAULT_HEAD_SECONDS
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head = _HeadTimer(self.loop, self.head_timeout_seconds,
                                lambda: _close(self.transport))

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head.arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head.disarm()
        super().connection_lost(exc)


class H11HeadDeadline(_HeadDeadline, H11Protocol):
    """h11's protocol with the head deadline (serve uses it when httptools is missing)."""

    def data_received(self, data: bytes) -> None:
        # IDLE: h11 has not parsed a request head yet (a new one, or a next one).
        if data and self.conn.their_state is h11.IDLE:
            self._head.arm()
        super().data_received(data)
        self._head_parsed_yet()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
            self._head.arm()  # a pipelined next head, partly buffered
        self._head_parsed_yet()

    def _head_parsed_yet(self) -> None:
        if self.conn.their_state is not h11.IDLE:
            self._head.disarm()


def _httptools_variant() -> type[asyncio.Protocol] | None:
    """httptools' protocol with the head deadline; None when httptools is not installed."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # pragma: no cover - httptools is an optional extra of uvicorn
        return None

    class HttpToolsHeadDeadline(_HeadDeadline, HttpToolsProtocol):
        _head_started = False  # a head partly parsed (set per connection once it starts)

        def on_message_begin(self) -> None:
            # The parser's callback at a request's first byte. A pipelined head's
            # deadline starts with the answer before it, as h11's does: not cut mid-answer.
            self._head_started = True
            if self.cycle is None or self.cycle.response_complete:
                self._head.arm()
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self._head_started = False
            self._head.disarm()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self._head_started:
                self._head.arm()

    return HttpToolsHeadDeadline


def head_deadline_protocol(seconds: float) -> type[asyncio.Protocol]:
    """The HTTP protocol uvicorn's ``http="auto"`` picks, with a ``seconds`` head deadline."""
    base: type[asyncio.Protocol] = H11HeadDeadline
    if AutoHTTPProtocol is not H11Protocol:
        base = _httptools_variant() or H11HeadDeadline
    return type(base.__name__, (base,), {"head_timeout_seconds": seconds})


class _BodyTimeout(Exception):
    """Raised from ``receive`` to unwind the app once the 408 is sent."""


def _has_body(scope: Scope) -> bool:
    """HTTP/1.1: a request has a body only if it declares one (RFC 9112, section 6.3)."""
    for name, value in scope.get("headers") or ():
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


class BodyDeadline:
    """ASGI middleware: 408 when a request's body is not complete within ``seconds``."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _has_body(scope):
            # Most requests (reads, streams, long-polls): no timer task per request.
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.seconds
        body_done = answered = timed_out = False

        async def bounded() -> Message:
            nonlocal body_done, timed_out
            if body_done:
                return await receive()  # the wait for http.disconnect: unbounded
            try:
                message = await asyncio.wait_for(receive(), deadline - loop.time())
            except TimeoutError:
                timed_out = True
                if not answered:  # else uvicorn ends the started response on the raise
                    await self._answer_408(scope, send)
                raise _BodyTimeout from None
            body_done = message["type"] != "http.request" or not message.get("more_body")
            return message

        async def tracked(message: Message) -> None:
            nonlocal answered
            if timed_out:
                return  # the app's own answer to the unwinding (e.g. FastAPI's 400)
            answered = True
            await send(message)

        try:
            await self.app(scope, bounded, tracked)
        except Exception:
            if not timed_out:
                raise

    async def _answer_408(self, scope: Scope, send: Send) -> None:
        response = problem_response(
            408, "request-timeout", "Request timeout",
            f"the request body did not arrive within {self.seconds:g} s "
            "(PN_HTTP_BODY_TIMEOUT_SECONDS); nothing was stored",
            field="body", headers={"Connection": "close"}, instance=scope.get("path"),
        )

        async def no_more() -> Message:
            return {"type": "http.disconnect"}

        await response(scope, no_more, send)
