"""Group commit: appends from concurrent threads share one transaction (one fsync).

The durability promise is unchanged: :meth:`GroupCommit.submit` returns only
after the transaction holding its item committed. Leader/follower: a caller
that finds no commit in progress commits every request queued so far, its
own included; callers that arrive meanwhile wait, and the first of them to
run leads the next batch. A caller alone commits at once, as before, so one
publisher at a time waits for nothing extra.

A batch that fails is retried one request at a time, so every caller gets
its own outcome: one bad request does not fail the others.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from partition_notify.core.errors import StoreError

T = TypeVar("T")
R = TypeVar("R")

#: Requests in one transaction at most; the queue holds one per waiting thread.
MAX_BATCH = 256
#: How long a follower waits for the batches ahead of its own: several times a
#: writer's own lock deadline (3 x the default 10 s connect timeout).
FOLLOWER_WAIT_SECONDS = 120.0
#: A follower past its deadline whose request a leader already took re-checks this often.
LEADER_CHECK_SECONDS = 1.0


@dataclass(eq=False, slots=True)
class _Request(Generic[T, R]):
    item: T
    #: In a leader's batch: its transaction decides, the caller can only wait for it.
    taken: bool = False
    done: bool = False
    result: R | None = None
    error: BaseException | None = None

    def finish(self, result: R | None, error: BaseException | None) -> None:
        self.result, self.error, self.done = result, error, True


class GroupCommit(Generic[T, R]):
    """Runs ``run_batch(items)`` (one transaction, one result per item) for concurrent callers."""

    def __init__(self, run_batch: Callable[[Sequence[T]], list[R]], *,
                 wait_seconds: float) -> None:
        self._run_batch = run_batch
        self._wait_seconds = wait_seconds
        self._cond = threading.Condition()
        self._queue: list[_Request[T, R]] = []
        self._busy = False
        #: Transactions committed and items in them (bench/durable_publish.py prints both).
        self.commits = 0
        self.items = 0

    def submit(self, item: T) -> R:
        request: _Request[T, R] = _Request(item)
        with self._cond:
            # Alone (nothing committing, nobody queued): lead at once, without queueing.
            # The queue's round trip and its wake-ups were a tenth of a lone publisher's
            # append in Python (bench/durable_publish.py); the batch is the same.
            alone = not self._busy and not self._queue
            if alone:
                self._busy = request.taken = True
        if alone:
            self._lead([request])
            return self._outcome(request)
        deadline = time.monotonic() + self._wait_seconds
        with self._cond:
            self._queue.append(request)
            self._cond.notify_all()  # observers of :meth:`wait_queued`
        while True:
            with self._cond:
                while self._busy and not request.done:
                    left = deadline - time.monotonic()
                    if left <= 0 and not request.taken:
                        self._queue.remove(request)  # withdrawn: certainly not logged
                        raise StoreError(
                            f"group commit: waited {self._wait_seconds:g} s for the "
                            "transactions ahead of this append; it was not logged")
                    # Once taken, the leader's transaction (bounded by the store's own lock
                    # and statement deadlines) decides; its end notifies.
                    self._cond.wait(left if left > 0 else LEADER_CHECK_SECONDS)
                if request.done:
                    break
                self._busy = True
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
                for r in batch:
                    r.taken = True
            self._lead(batch)
        return self._outcome(request)

    def _lead(self, batch: list[_Request[T, R]]) -> None:
        """Commit ``batch`` (taken, with ``_busy`` set), then let the next leader in."""
        try:
            self._commit(batch)
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    @staticmethod
    def _outcome(request: _Request[T, R]) -> R:
        if request.error is not None:
            raise request.error
        return request.result  # type: ignore[return-value]  # set with done, error None

    def wait_queued(self, n: int, timeout: float) -> bool:
        """Wait until ``n`` requests wait for the next batch (tests observe batching)."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self._queue) >= n, timeout)

    def _commit(self, batch: list[_Request[T, R]]) -> None:
        try:
            results = self._run_batch([r.item for r in batch])
        except Exception as exc:
            if len(batch) == 1:
                batch[0].finish(None, exc)
                return
            self._one_by_one(batch)
            return
        except BaseException as exc:  # interrupted: nobody's outcome is known
            for r in batch:
                r.finish(None, exc)
            raise
        self.commits += 1
        self.items += len(batch)
        for r, result in zip(batch, results, strict=True):
            r.finish(result, None)

    def _one_by_one(self, batch: list[_Request[T, R]]) -> None:
        for r in batch:
            try:
                result = self._run_batch([r.item])[0]
            except Exception as exc:
                r.finish(None, exc)
            else:
                self.commits += 1
                self.items += 1
                r.finish(result, None)
