"""The per-topic sequence window: exact, bounded, collapses as holes fill."""

from __future__ import annotations

from partition_notify.subscriber.seq_window import SeqWindow


def test_in_order_numbers_keep_only_a_mark():
    w = SeqWindow(0)
    for n in range(1, 100_001):
        assert not w.seen(n)
        w.add(n)
    assert (w.high, w.above) == (100_000, set())
    assert w.seen(1) and w.seen(100_000) and not w.seen(100_001)


def test_out_of_order_numbers_collapse_when_the_hole_fills():
    w = SeqWindow(10)
    for n in (13, 12, 15):
        w.add(n)
    assert (w.high, w.above) == (10, {12, 13, 15})
    assert list(w.holes(17)) == [(11, 11), (14, 14), (16, 16)]
    w.add(11)
    assert (w.high, w.above) == (13, {15})
    assert w.seen(12) and not w.seen(14)


def test_giving_up_a_hole_moves_the_mark_past_it():
    w = SeqWindow(0)
    w.add(3)
    w.add(5)
    w.give_up_through(2)
    assert (w.high, w.above) == (3, {5})
    w.give_up_through(4)
    assert (w.high, w.above) == (5, set())
