"""Receipts awaited with a deadline.

stomp.py sends frames without blocking and its own receipt waits have no
timeout, so the STOMP transport keeps this book: register the receipt ids
*before* sending, resolve them as RECEIPT frames arrive, fail them on an
ERROR frame or a lost connection, and wait for a whole batch with a deadline.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterable


class ReceiptFailed(Exception):
    """The broker refused the frame or the connection went away before it confirmed."""


class ReceiptTimeout(Exception):
    """The deadline passed with receipts still outstanding."""

    def __init__(self, missing: int, total: int) -> None:
        super().__init__(f"{missing} of {total} receipt(s) still outstanding")
        self.missing = missing
        self.total = total


class Batch:
    """Receipt ids sent together; done when all arrived, failed at the first refusal."""

    __slots__ = ("error", "ids", "notify_at", "refused", "remaining")

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids
        self.remaining = set(ids)
        self.error: str | None = None
        #: Receipts refused for good, with the broker's reason: the frame is
        #: settled (it will never be confirmed) but the rest of the batch goes on.
        self.refused: dict[str, str] = {}
        #: Wake the waiter once this few receipts remain (0: when all arrived).
        self.notify_at = 0


class ReceiptBook:
    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._counter = itertools.count(1)
        self._cond = threading.Condition()
        self._waiting: dict[str, Batch] = {}

    def new_ids(self, n: int) -> list[str]:
        return [f"{self._prefix}-{next(self._counter)}" for _ in range(n)]

    def expect(self, ids: Iterable[str]) -> Batch:
        batch = Batch(list(ids))
        with self._cond:
            for rid in batch.ids:
                self._waiting[rid] = batch
        return batch

    def resolve(self, receipt_id: str) -> bool:
        """A RECEIPT arrived; False when nobody waits for it (late or foreign)."""
        with self._cond:
            batch = self._waiting.pop(receipt_id, None)
            if batch is None:
                return False
            batch.remaining.discard(receipt_id)
            if len(batch.remaining) <= batch.notify_at:
                self._cond.notify_all()
            return True

    def fail(self, receipt_id: str, reason: str, *, permanent: bool = False) -> bool:
        """The broker answered this receipt with an ERROR frame.

        A ``permanent`` refusal settles that one frame (``Batch.refused``); any
        other fails the whole batch.
        """
        with self._cond:
            batch = self._waiting.get(receipt_id)
            if batch is None:
                return False
            if permanent:
                del self._waiting[receipt_id]
                batch.remaining.discard(receipt_id)
                batch.refused[receipt_id] = reason
            elif batch.error is None:
                batch.error = reason
            self._cond.notify_all()
            return True

    def fail_all(self, reason: str) -> int:
        """Fail every batch still waiting (connection lost); returns how many."""
        with self._cond:
            batches = {id(b): b for b in self._waiting.values()}
            for batch in batches.values():
                if batch.error is None:
                    batch.error = reason
            self._cond.notify_all()
            return len(batches)

    def wait(self, batch: Batch, deadline: float) -> None:
        """Return when every receipt of ``batch`` arrived; raise ReceiptFailed/ReceiptTimeout."""
        try:
            self.wait_below(batch, 0, deadline)
        finally:
            self.forget(batch)

    def wait_below(self, batch: Batch, at_most: int, deadline: float) -> None:
        """Return once at most ``at_most`` receipts of ``batch`` are outstanding."""
        with self._cond:
            batch.notify_at = at_most
            while len(batch.remaining) > at_most and batch.error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ReceiptTimeout(len(batch.remaining), len(batch.ids))
                self._cond.wait(left)
            if batch.error is not None:
                raise ReceiptFailed(batch.error)

    def forget(self, batch: Batch) -> None:
        with self._cond:
            for rid in batch.remaining:
                if self._waiting.get(rid) is batch:
                    del self._waiting[rid]

    def outstanding(self) -> int:
        with self._cond:
            return len(self._waiting)
