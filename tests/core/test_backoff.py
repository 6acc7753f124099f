"""The shared retry schedule keeps each site's constants."""

from __future__ import annotations

import threading
import time

import pytest

from partition_notify.core.backoff import Backoff


def schedule(b: Backoff, n: int) -> list[float]:
    return [b.failed() for _ in range(n)]


def test_each_sites_schedule():
    assert schedule(Backoff(initial=0.1, cap=5.0, jitter=0.2), 8) == pytest.approx(
        [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0])  # STOMP reconnect
    assert schedule(Backoff(initial=0.02, cap=5.0), 3) == pytest.approx([0.02, 0.04, 0.08])
    relay = Backoff(initial=0.5, cap=8.0)
    assert [relay.delay(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    pending = Backoff(initial=1.0, cap=30.0)
    assert pending.delay(0) == 1.0 and schedule(pending, 7) == [1, 2, 4, 8, 16, 30, 30]


def test_any_failure_count_gives_the_cap():
    assert Backoff(initial=0.5, cap=8.0).delay(10**6) == 8.0
    assert Backoff(initial=1.0, cap=1.0).delay(10**6) == 1.0


def test_reset_starts_again():
    b = Backoff(initial=1.0, cap=30.0)
    schedule(b, 4)
    b.reset()
    assert b.failed() == 1.0


@pytest.mark.parametrize("args", [dict(initial=0, cap=1), dict(initial=2, cap=1),
                                  dict(initial=1, cap=2, factor=0.5),
                                  dict(initial=1, cap=2, jitter=-1)])
def test_bad_constants_are_refused(args):
    with pytest.raises(ValueError, match="backoff needs"):
        Backoff(**args)


def test_wait_honours_stop_and_deadline():
    stop = threading.Event()
    b = Backoff(initial=10.0, cap=10.0, jitter=0.2)
    started = time.monotonic()
    assert b.wait(stop, 10.0, deadline=time.monotonic() + 0.05)  # ran out at the deadline
    assert time.monotonic() - started < 5.0
    stop.set()
    assert not b.wait(stop, 10.0)
