"""A quiet-period rule in two real ``serve`` processes: fired by the timer, once.

The rules job's interval is an hour, so only the timer ``serve`` plans for the
moment a spec falls quiet can fire it; two processes on one store (SQLite file,
PostgreSQL) both plan it, one derived set-done comes out. The test waits for
the set-done (the late-subscriber protocol), never sleeps.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from partition_notify.app import App, build_app
from tests.rules.test_evaluator import derived
from tests.serve.helpers import Spawn

FAST, SLOW = 3, 6


@pytest.fixture
def app(store_url: str) -> Iterator[App]:
    application = build_app(store_url=store_url, transport_url="embedded://")
    yield application
    application.close()


def test_two_serves_fire_a_quiet_rule_once_by_its_timer(app: App, store_url: str,
                                                          serve: Spawn) -> None:
    for table, seconds in (("clicks", FAST), ("views", SLOW)):
        app.publisher.register_table("web", table, ["datestamp", "hour"])
        app.rules.add(f"web.{table}", name="settled", kind="quiet",
                      params={"by": ["datestamp"], "quietSeconds": seconds})
        app.publisher.announce_partitions("web", table, [{"datestamp": "20260301", "hour": h}
                                                         for h in ("00", "01")])
    announced = time.monotonic()
    procs = [serve(store_url, "embedded://", rules_interval_seconds="3600") for _ in range(2)]
    sub = app.subscriber()
    try:
        fast = sub.wait_for_set_done("web", "clicks", "datestamp=20260301", timeout=90)
        assert time.monotonic() - announced >= FAST  # not before the quiet period
        # By the slow rule's firing, both processes' timers for the fast one have run.
        sub.wait_for_set_done("web", "views", "datestamp=20260301", timeout=90)
    finally:
        sub.close()
    for p in procs:
        assert p.proc.poll() is None, p.text()
    assert fast.derived_from is not None and fast.derived_from.kind == "quiet"
    assert sorted((m.table, m.spec) for m in derived(app)) == [
        ("clicks", "datestamp=20260301"), ("views", "datestamp=20260301")]
