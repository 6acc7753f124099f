"""serve keeps an idle HTTP connection open for PN_HTTP_KEEPALIVE_SECONDS, not uvicorn's 5 s.

A Spark driver keeps one connection to serve for its life; with commits minutes
apart, a short keep-alive made every commit open a new connection
(docs/benchmarks.md, "Spark commit -> Airflow acts"). Measured on a real
``serve``: a raw socket sends one request, reads the answer, then waits (with
a deadline) for serve to close the idle connection.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from tests.http.support import HttpServe

#: Longer than any keep-alive tried here, so a connection serve never closes fails the test.
CLOSE_DEADLINE_SECONDS = 15.0


def idle_close_after(serve: HttpServe) -> float:
    """Seconds from serve's answer to serve closing the then idle connection."""
    with socket.create_connection(("127.0.0.1", serve.port), timeout=CLOSE_DEADLINE_SECONDS) as s:
        s.sendall(b"GET /readyz HTTP/1.1\r\nHost: t\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += s.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:100]
        answered = time.monotonic()
        while True:  # the rest of the answer, then EOF when serve closes (or the deadline)
            try:
                if not s.recv(65536):
                    return time.monotonic() - answered
            except TimeoutError:
                pytest.fail(f"serve kept an idle connection > {CLOSE_DEADLINE_SECONDS:g} s")


@pytest.mark.parametrize("keepalive", [1, 8])
def test_serve_closes_an_idle_connection_after_the_configured_keepalive(
        keepalive: int, tmp_path: Path) -> None:
    tmp = tmp_path
    serve = HttpServe(f"sqlite:///{tmp}/store.db", tmp / "serve.log",
                      env_extra={"PN_HTTP_KEEPALIVE_SECONDS": str(keepalive)}).start()
    try:
        took = idle_close_after(serve)
    finally:
        serve.stop()
    # uvicorn's default (5 s) would fail both: too late for 1, too early for 8.
    assert keepalive - 0.5 <= took <= keepalive + 3.0, f"closed after {took:.2f} s"

