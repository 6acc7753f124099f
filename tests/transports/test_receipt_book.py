"""The STOMP transport's receipt book: every outcome of a batch, with deadlines."""

from __future__ import annotations

import threading
import time

import pytest
from partition_notify.transports.stomp._pending import ReceiptBook, ReceiptFailed, ReceiptTimeout


def test_batch_completes_when_every_receipt_arrived():
    book = ReceiptBook("t")
    ids = book.new_ids(3)
    batch = book.expect(ids)
    for rid in ids:
        threading.Timer(0.01, book.resolve, [rid]).start()
    book.wait(batch, time.monotonic() + 5)
    assert book.outstanding() == 0


def test_error_frame_fails_the_batch_and_late_receipts_are_ignored():
    book = ReceiptBook("t")
    ids = book.new_ids(2)
    batch = book.expect(ids)
    assert book.fail(ids[1], "not authorized")
    with pytest.raises(ReceiptFailed, match="not authorized"):
        book.wait(batch, time.monotonic() + 5)
    assert book.outstanding() == 0
    assert not book.resolve(ids[0]), "forgotten after the failure"


def test_lost_connection_fails_every_waiting_batch():
    book = ReceiptBook("t")
    a, b = book.expect(book.new_ids(1)), book.expect(book.new_ids(1))
    assert book.fail_all("connection lost") == 2
    for batch in (a, b):
        with pytest.raises(ReceiptFailed, match="connection lost"):
            book.wait(batch, time.monotonic() + 5)


def test_deadline_raises_with_the_count_missing():
    book = ReceiptBook("t")
    ids = book.new_ids(3)
    batch = book.expect(ids)
    book.resolve(ids[0])
    started = time.monotonic()
    with pytest.raises(ReceiptTimeout) as err:
        book.wait(batch, started + 0.1)
    assert (err.value.missing, err.value.total) == (2, 3)
    assert 0.09 <= time.monotonic() - started < 2
    assert book.outstanding() == 0


def test_wait_below_returns_once_the_window_drained():
    book = ReceiptBook("t")
    ids = book.new_ids(10)
    batch = book.expect(ids)
    for rid in ids[:6]:
        threading.Timer(0.01, book.resolve, [rid]).start()
    book.wait_below(batch, 4, time.monotonic() + 5)
    assert len(batch.remaining) <= 4
    with pytest.raises(ReceiptTimeout):
        book.wait_below(batch, 0, time.monotonic() + 0.05)


def test_permanent_refusal_settles_one_frame_and_the_rest_still_complete():
    book = ReceiptBook("t")
    ids = book.new_ids(3)
    batch = book.expect(ids)
    assert book.fail(ids[1], "User x is not authorized to write to: topic://y", permanent=True)
    book.resolve(ids[0])
    threading.Timer(0.01, book.resolve, [ids[2]]).start()
    book.wait(batch, time.monotonic() + 5)  # no ReceiptFailed: the refusal is per frame
    assert batch.refused == {ids[1]: "User x is not authorized to write to: topic://y"}
    assert not batch.remaining and book.outstanding() == 0


def test_permanent_refusal_patterns():
    from partition_notify.transports.stomp._wire import PERMANENT_REFUSAL

    for reason in ("User pn_service is not authorized to write to: topic://denied.x",
                   "java.lang.SecurityException: ...", "InvalidDestinationException: bad",
                   "access_refused: no write permission"):
        assert PERMANENT_REFUSAL.search(reason), reason
    for reason in ("Usage Manager Memory Limit reached", "connection closed"):
        assert not PERMANENT_REFUSAL.search(reason), reason
