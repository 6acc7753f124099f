"""serve closes connections that never finish a request's head or body.

Without deadlines, four sockets that each sent half a request head held every
connection of PN_HTTP_MAX_CONNECTIONS=4 for as long as they stayed open: every
other client, /healthz included, got 503 too-many-connections. Measured on a
real ``serve`` over raw sockets, with 1 s deadlines so the tests stay short.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import httpx
import pytest

from partition_notify.app import build_app
from partition_notify.http.store import HttpStore
from tests.http.support import HttpServe, until_closed

MAX_CONNECTIONS = 4
HEAD_SECONDS = BODY_SECONDS = 1
#: serve must close by then; far below the keep-alive (120 s), so only the deadline can.
CLOSE_DEADLINE_SECONDS = HEAD_SECONDS + 5.0
TABLE = "slowdb.orders"
PARTIAL_HEAD = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"


@dataclass
class Slow:
    serve: HttpServe
    token: str


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slow]:
    tmp = tmp_path_factory.mktemp("slow")
    url = f"sqlite:///{tmp}/store.db"
    app = build_app(store_url=url, transport_url="embedded://")
    app.publisher.register_table("slowdb", "orders", ["datestamp"])
    token = HttpStore(app.store).create_token("t-write", "write")[1]
    app.close()
    serve = HttpServe(url, tmp / "serve.log", env_extra={
        "PN_HTTP_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
        "PN_HTTP_HEADER_TIMEOUT_SECONDS": str(HEAD_SECONDS),
        "PN_HTTP_BODY_TIMEOUT_SECONDS": str(BODY_SECONDS),
        "PN_HTTP_ANONYMOUS_READ": "true",
    }).start()
    try:
        yield Slow(serve, token)
    finally:
        assert serve.stop() == 0, serve.text()[-2000:]


def connect(stack: ExitStack, serve: HttpServe) -> socket.socket:
    return stack.enter_context(
        socket.create_connection(("127.0.0.1", serve.port), timeout=CLOSE_DEADLINE_SECONDS))


def test_partial_heads_are_closed_and_free_the_connection_cap(slow: Slow) -> None:
    with ExitStack() as stack:
        stuck = [connect(stack, slow.serve) for _ in range(MAX_CONNECTIONS)]
        for s in stuck:
            s.sendall(PARTIAL_HEAD)
        for s in stuck:
            until_closed(s, CLOSE_DEADLINE_SECONDS)
        assert httpx.get(slow.serve.base + "/healthz", timeout=10).status_code == 200


def test_a_connection_that_sends_nothing_is_closed(slow: Slow) -> None:
    with ExitStack() as stack:
        assert until_closed(connect(stack, slow.serve), CLOSE_DEADLINE_SECONDS) == b""


def test_a_dripped_head_is_closed_at_the_deadline_from_its_first_byte(slow: Slow) -> None:
    with ExitStack() as stack:
        s = connect(stack, slow.serve)
        s.settimeout(0.25)  # one header line per 0.25 s: each resets no deadline
        started = time.monotonic()
        s.sendall(b"GET /healthz HTTP/1.1\r\n")
        line = 0
        while time.monotonic() - started < CLOSE_DEADLINE_SECONDS:
            try:
                s.sendall(b"X-Drip-%d: y\r\n" % line)
                if not s.recv(65536):
                    break
            except TimeoutError:
                line += 1
            except (BrokenPipeError, ConnectionResetError):
                break
        else:
            pytest.fail(f"serve read a dripped head for > {CLOSE_DEADLINE_SECONDS:g} s")


def test_the_next_request_on_a_keepalive_connection_has_a_head_deadline(slow: Slow) -> None:
    with ExitStack() as stack:
        s = connect(stack, slow.serve)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += s.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        s.sendall(PARTIAL_HEAD)
        until_closed(s, CLOSE_DEADLINE_SECONDS)


def test_a_body_short_of_its_content_length_gets_408_and_stores_nothing(slow: Slow) -> None:
    with ExitStack() as stack:
        s = connect(stack, slow.serve)
        s.sendall(f"POST /v1/tables/{TABLE}/set-done HTTP/1.1\r\nHost: x\r\n"
                  f"Authorization: Bearer {slow.token}\r\nContent-Type: application/json\r\n"
                  "Content-Length: 100\r\n\r\n".encode() + b'{"spec": ')
        answer = until_closed(s, CLOSE_DEADLINE_SECONDS)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:300]
    assert b"content-type: application/problem+json" in answer.lower(), answer[:300]
    assert b"urn:partition-notify:problem:request-timeout" in answer, answer
    done = httpx.get(f"{slow.serve.base}/v1/tables/{TABLE}/set-done", timeout=10)
    assert done.status_code == 200 and done.json()["setDone"] == [], done.text


def test_streams_long_polls_and_writes_outlive_the_deadlines(slow: Slow) -> None:
    base = slow.serve.base
    with ExitStack() as stack:
        reader = stack.enter_context(httpx.Client(base_url=base, timeout=30))
        sse = stack.enter_context(reader.stream("GET", f"/v1/tables/{TABLE}/stream"))
        assert sse.status_code == 200
        # 2.5 s: past both 1 s deadlines, for the long-poll and the stream beside it.
        wait = httpx.get(f"{base}/v1/tables/{TABLE}/wait",
                         params={"spec": "datestamp=1", "timeout": 2.5}, timeout=30)
        assert wait.status_code == 204, wait.text
        with httpx.Client(base_url=base, timeout=30,
                          headers={"Authorization": f"Bearer {slow.token}"}) as c:
            r = c.post(f"/v1/tables/{TABLE}/set-done", json={"spec": "datestamp=2"})
            assert r.status_code == 201, r.text
        for line in sse.iter_lines():  # the stream still delivers
            if line == "event: PARTITION_DONE":
                break
