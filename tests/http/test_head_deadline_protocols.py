"""Both of uvicorn's HTTP parsers get the head deadline (http/slow_clients.py).

serve uses httptools when it is installed and h11 otherwise; tests/http/
test_slow_clients.py exercises the one installed, these both, each under a
real uvicorn on a real socket with a minimal app (1 s deadline).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from partition_notify.http.slow_clients import H11HeadDeadline, _httptools_variant
from tests.http.support import until_closed
from tests.support.net import free_port, wait_until

HEAD_SECONDS = 1.0
CLOSE_DEADLINE_SECONDS = HEAD_SECONDS + 5.0
#: A handler slower than the head deadline: the deadline must not reach past the head.
HANDLER_SECONDS = HEAD_SECONDS + 0.5


async def slow_app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    await asyncio.sleep(HANDLER_SECONDS)  # the handler's own work, not synchronisation
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture(params=["h11", "httptools"])
def port(request: pytest.FixtureRequest) -> Iterator[int]:
    base = H11HeadDeadline if request.param == "h11" else _httptools_variant()
    if base is None:
        pytest.skip("httptools is not installed")
    protocol = type(base.__name__, (base,), {"head_timeout_seconds": HEAD_SECONDS})
    config = uvicorn.Config(slow_app, host="127.0.0.1", port=free_port(), http=protocol,
                            lifespan="off", log_level="warning", timeout_keep_alive=120)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, 30, "uvicorn to listen")
    try:
        yield config.port
    finally:
        server.should_exit = True
        thread.join(10)


def test_a_partial_head_is_closed(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        assert until_closed(s, CLOSE_DEADLINE_SECONDS) == b""


def test_a_slow_handler_is_answered_then_a_next_partial_head_is_closed(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while not answer.endswith(b"ok"):
            answer += s.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200"), answer
        s.sendall(b"GET / HTTP/1.1\r\n")
        assert until_closed(s, CLOSE_DEADLINE_SECONDS) == b""


def test_a_pipelined_partial_head_is_closed(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\n")
        answer = until_closed(s, CLOSE_DEADLINE_SECONDS)
        assert answer.startswith(b"HTTP/1.1 200"), answer
