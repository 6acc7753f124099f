"""What on call alerts on, from a real ``serve``'s /metrics: instances late now, per table.

Counters of PARTITION_LATE messages say that something went late at some time; an
alert wants a gauge that is non-zero exactly while an instance is late and not done.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.http.support import Server, make_late, start_server, unique_db

FAMILY = "pn_deadline_late_open"


@pytest.fixture(scope="module", params=["sqlite"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    # The deadline checker runs often, so an every-minute expectation falls late in the test.
    yield from start_server(request, PN_DEADLINE_CHECK_INTERVAL_SECONDS="0.5",
                            PN_DEADLINE_LOOKBACK_SECONDS="150")


def _late_gauge(server: Server, table: str) -> float | None:
    text = httpx.get(f"{server.base}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith(f'{FAMILY}{{table="{table}"}} '):
            return float(line.split()[-1])
    return None


def test_the_late_gauge_is_set_while_late_and_cleared_once_done(server: Server) -> None:
    db = unique_db()
    table = f"{db}.ticks"
    spec = make_late(server, db, "ticks")
    deadline = time.monotonic() + 30
    while not (_late_gauge(server, table) or 0) >= 1:
        assert time.monotonic() < deadline, f"{FAMILY} for {table} never rose"
        time.sleep(0.2)  # serve's checker (another process) sets it; nothing to await

    lates = server.app.deadlines.open_late(db, "ticks")
    for check in lates:
        server.app.publisher.send_mark_set_done(db, "ticks", check.spec)
    assert spec in [c.spec for c in lates]
    deadline = time.monotonic() + 30
    while (_late_gauge(server, table) or 0) > 0 and server.app.deadlines.open_late(db, "ticks"):
        assert time.monotonic() < deadline, f"{FAMILY} for {table} stayed up once done"
        time.sleep(0.2)
    # No label is left behind for a table with nothing late (bounded cardinality).
    deadline = time.monotonic() + 30
    while _late_gauge(server, table) is not None:
        assert time.monotonic() < deadline, f"{FAMILY} kept a series for {table}"
        time.sleep(0.2)
