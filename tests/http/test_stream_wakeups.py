"""SSE clients learn of another process's commit from the database's signal, not the poll.

``serve`` runs with a 30 s poll interval: a hub that only polled would hand
these events over after up to 30 s. The publisher is this test process, a
different process from ``serve``, so no in-process after-commit hook helps.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.http.support import Server, start_server
from tests.http.test_reads import Sse
from tests.support.markers import uses

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
