"""The PN_METRICS_PORT endpoint against clients that connect and never finish a request.

Each connection gets a thread; a connection that sends nothing (a half-open
socket after a network drop, a TCP probe that never closes, a stuck scraper)
held its thread for ever, and nothing capped how many threads that made.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from partition_notify.metrics import Metrics

READ_TIMEOUT = 0.5
CAP = 8


@contextmanager
def serving(read_timeout: float = READ_TIMEOUT) -> Iterator[int]:
    m = Metrics()
    port = m.serve(0, read_timeout=read_timeout, max_connections=CAP)
    try:
        yield port
    finally:
        m.close()


def idle(port: int, stack: ExitStack, wait: float = 5.0) -> socket.socket:
    s = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=wait))
    return s


def closed_within(s: socket.socket, seconds: float) -> bool:
    """Whether the server closed ``s`` (EOF or reset) within ``seconds``."""
    s.settimeout(seconds)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def scrape(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
        return int(r.status)


def test_a_connection_that_sends_nothing_is_closed_after_the_read_timeout() -> None:
    with serving() as port, ExitStack() as stack:
        silent = idle(port, stack)
        partial = idle(port, stack)
        partial.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # the head never ends
        started = time.monotonic()
        assert closed_within(silent, READ_TIMEOUT * 8), "a silent connection was kept open"
        assert closed_within(partial, READ_TIMEOUT * 8), "an unfinished request was kept open"
        assert time.monotonic() - started < READ_TIMEOUT * 8
        assert scrape(port) == 200


def test_connections_over_the_cap_are_closed_at_once_and_threads_stay_bounded() -> None:
    before = threading.active_count()
    with serving(read_timeout=30.0) as port, ExitStack() as stack:
        held = [idle(port, stack) for _ in range(CAP)]
        over = [idle(port, stack) for _ in range(10)]
        for s in over:
            assert closed_within(s, 5.0), "a connection over the cap was kept open"
        assert threading.active_count() <= before + 1 + CAP
        for s in held:
            s.close()
        # A slot frees when its client leaves: scrapes work again.
        deadline = time.monotonic() + 5
        while True:
            try:
                assert scrape(port) == 200
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
