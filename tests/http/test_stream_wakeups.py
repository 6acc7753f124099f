"""SSE clients and long-polls learn of another process's commit from the database's
signal, not the poll.

``serve`` runs with a 30 s poll interval: a hub that only polled would hand
these events over after up to 30 s. The publisher is this test process, a
different process from ``serve``, so no in-process after-commit hook helps.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.http.support import Server, start_server
from tests.http.test_reads import Sse
from tests.support.markers import uses
from tests.support.net import wait_until

POLL_SECONDS = 30.0
#: Far below the poll interval, far above a wake-up on a loaded 2-core machine.
WOKEN_WITHIN_SECONDS = 3.0


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
@uses("postgres", when=lambda param: param == "postgresql")
def slow_poll_server(request: pytest.FixtureRequest) -> Iterator[Server]:
    yield from start_server(request, PN_POLL_INTERVAL_SECONDS=str(POLL_SECONDS))


def test_commit_in_another_process_reaches_sse_client_before_the_poll(
        slow_poll_server: Server) -> None:
    server = slow_poll_server
    table = server.table()
    db, name = table.split(".")
    pub = server.app.publisher
    delays: list[float] = []
    with server.client("read", timeout=httpx.Timeout(POLL_SECONDS * 2)) as c, \
            c.stream("GET", f"/v1/tables/{table}/stream?last_event_id=0") as r:
        assert r.status_code == 200
        events = iter(Sse(r))
        # Replayed or live: once it is here, the stream listens to the hub (it
        # registers before its replay read), so the timed ones below come live.
        warm = pub.send_mark_set_done(db, name, "datestamp=warm-up")
        assert next(events)[0] == warm.event_id
        # Three in a row: one could meet a poll by luck (a 10% chance each at 3 of 30 s).
        for i in range(3):
            started = time.monotonic()
            sent = pub.send_mark_set_done(db, name, f"datestamp={i}")
            event_id, event_type, _ = next(events)
            delays.append(time.monotonic() - started)
            assert (event_id, event_type) == (sent.event_id, "PARTITION_DONE")
    assert max(delays) < WOKEN_WITHIN_SECONDS, (
        f"commit -> SSE event took {[round(d, 3) for d in delays]} s with a "
        f"{POLL_SECONDS:g} s poll: the hub was not woken by the commit")


def open_waits(server: Server) -> float:
    """serve's own count of long-polls registered with its hub (pn_http_waits)."""
    text = httpx.get(server.base + "/metrics", timeout=10).text
    found = re.search(r"^pn_http_waits (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def test_commit_in_another_process_ends_a_long_poll_before_the_poll(
        slow_poll_server: Server) -> None:
    server = slow_poll_server
    table = server.table()
    db, name = table.split(".")
    with server.client("read", timeout=httpx.Timeout(POLL_SECONDS * 2)) as c, \
            ThreadPoolExecutor(1) as pool:
        pending = pool.submit(c.get, f"/v1/tables/{table}/wait",
                              params={"spec": "datestamp=1", "timeout": POLL_SECONDS * 1.5})
        # Counted once it listens to the hub, before its read of the store: from here
        # on a commit reaches it through the hub (or that read), never by luck.
        wait_until(lambda: open_waits(server) >= 1, 30, "serve to hold the long-poll", 0.02)
        started = time.monotonic()
        sent = server.app.publisher.send_mark_set_done(db, name, "datestamp=1")
        r = pending.result(POLL_SECONDS * 2)
        took = time.monotonic() - started
    assert r.status_code == 200, r.text
    assert r.json()["messageId"] == sent.message_id
    assert took < WOKEN_WITHIN_SECONDS, (
        f"commit -> long-poll answer took {took:.3f} s with a {POLL_SECONDS:g} s poll: "
        "the hub was not woken by the commit")
