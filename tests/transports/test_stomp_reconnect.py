"""A subscriber that loses its broker connection reconnects, re-subscribes, re-reads history."""

from __future__ import annotations

import threading
import time

import pytest

from tests.contract.faults import FaultProxy
from tests.support.markers import uses
from tests.transports.stomp_helpers import STOMP_BROKERS, build, host_port, stomp_spec


@pytest.fixture(params=STOMP_BROKERS)
@uses("broker")
def spec(request):
    return stomp_spec(request.param)


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class Collector:
    def __init__(self) -> None:
        self.ids: list[str] = []
        self.changed = threading.Condition()

    def __call__(self, msg) -> None:
        with self.changed:
            self.ids.append(msg.message_id)
            self.changed.notify_all()

    def wait_for(self, message_id: str, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: message_id in self.ids, timeout)


@pytest.mark.parametrize("fault", ["cut", "silence"])
def test_subscriber_survives_a_lost_connection(spec, sqlite_url, fault):
    """cut: the connection drops (broker crash). silence: nothing comes back, so only
    the STOMP heart-beat can tell (half-open TCP)."""
    proxy = FaultProxy(*host_port(spec))
    publisher = build(spec, sqlite_url)  # straight to the broker
    follower = build(spec, sqlite_url, url=proxy.url(), heartbeat_ms=500)
    got = Collector()
    try:
        publisher.publisher.register_table("rc", "events", ["d"])
        sub = follower.subscriber()
        sub.subscribe(("rc", "events"), got)
        a = publisher.publisher.send_mark_set_done("rc", "events", "d=a")
        assert got.wait_for(a.message_id, 10), "live delivery before the fault"

        link = follower.transport.link
        if fault == "cut":
            proxy.cut(refuse_new=True)  # reconnect attempts fail until we let them in
        else:
            proxy.hold_replies()  # receive heart-beats stop; TCP stays up
        wait_until(lambda: link._conn is None, 10, "the link to notice the loss")
        # Published while the subscriber is away: no live delivery possible.
        b = publisher.publisher.send_mark_set_done("rc", "events", "d=b")
        proxy.release_replies()
        proxy.accept_again()
        assert got.wait_for(b.message_id, 20), "missed set-done not recovered from history"
        c = publisher.publisher.send_mark_set_done("rc", "events", "d=c")
        assert got.wait_for(c.message_id, 10), "live delivery after the reconnect"
        assert sub.stats.reconnects >= 1
        assert link.connects >= 2
        assert sorted(got.ids) == sorted({a.message_id, b.message_id, c.message_id}), \
            "each set-done exactly once (history re-read overlaps live)"
        sub.close()
    finally:
        follower.close()
        publisher.close()
        proxy.close()


def test_reconnecting_stops_on_close(spec, sqlite_url):
    proxy = FaultProxy(*host_port(spec))
    follower = build(spec, sqlite_url, url=proxy.url())
    try:
        follower.publisher.register_table("rc", "backoff", ["d"])
        sub = follower.subscriber()
        sub.subscribe(("rc", "backoff"))
        proxy.cut(refuse_new=True)
        link = follower.transport.link
        wait_until(lambda: link._reconnector is not None, 10, "the reconnect thread")
        reconnector = link._reconnector
        started = time.monotonic()
        sub.close()
        follower.close()
        reconnector.join(5)
        assert not reconnector.is_alive(), "closing stops reconnecting"
        assert time.monotonic() - started < 6
    finally:
        proxy.close()
