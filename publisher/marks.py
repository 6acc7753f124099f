"""Marking published events lazily, in batches, off the publish path.

A publish is durable once the log commits; the broker's receipt makes it
delivered. Recording that receipt (``published_at``) in its own commit per
publish doubled the durable commits on the hot path, so the marks are
collected here and written by a background flusher: one transaction per
batch, flushed every ``interval`` seconds, at ``max_batch`` ids, and on close.

Nothing is lost meanwhile. An event whose mark is still pending is
unpublished in the log; the relay leaves it alone while it is younger than
its writer grace (seconds, far above the flush interval), and re-sends it
only if this process died before flushing: at least once, de-duplicated by
subscribers by ``messageId``.

A writer that simply ends (a script or Spark job that never calls
``App.close()``) still writes its marks: every batcher with a running
flusher is flushed at interpreter exit, within its ``exit_timeout``. Only a
process that is killed (or whose store is unreachable past that deadline)
leaves marks for the relay.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence

from partition_notify.core.errors import PartitionNotifyError

log = logging.getLogger(__name__)

#: Seconds between flushes of pending marks (PublisherConfig.mark_flush_interval_seconds).
DEFAULT_FLUSH_INTERVAL_SECONDS = 0.1
#: Pending marks that make the flusher write at once rather than at the interval.
DEFAULT_MAX_BATCH = 500

#: Seconds a batcher may spend flushing at interpreter exit, unless told otherwise
#: (App passes PN_CLOSE_TIMEOUT_SECONDS).
DEFAULT_EXIT_TIMEOUT_SECONDS = 5.0

Mark = Callable[[Sequence[int]], None]

# Batchers whose flusher runs; weak, so a batcher dropped without close() is not kept.
_LIVE: weakref.WeakSet[MarkBatcher] = weakref.WeakSet()
_hook_lock = threading.Lock()
_hook_registered = False


def _flush_at_exit() -> None:
    """atexit: close every live batcher, each within its own deadline."""
    for batcher in list(_LIVE):
        batcher.close(batcher.exit_timeout)


def _track(batcher: MarkBatcher) -> None:
    global _hook_registered
    with _hook_lock:
        if not _hook_registered:
            # Runs before daemon threads stop and while the store is still open.
            atexit.register(_flush_at_exit)
            _hook_registered = True
        _LIVE.add(batcher)


class MarkBatcher:
    """Collects ids of events the broker confirmed and marks them in batches.

    ``interval == 0`` marks each call at once, in the caller's thread (the
    eager path: one more commit per publish).
    """

    def __init__(
        self,
        mark: Mark,
        *,
        interval: float = DEFAULT_FLUSH_INTERVAL_SECONDS,
        max_batch: int = DEFAULT_MAX_BATCH,
        exit_timeout: float = DEFAULT_EXIT_TIMEOUT_SECONDS,
    ) -> None:
        self._mark = mark
        self.interval = interval
        self.max_batch = max_batch
        self.exit_timeout = exit_timeout
        self._pending: list[int] = []
        self._cond = threading.Condition()
        # Held while a batch is out of _pending and being written: flush() waits
        # for it, so a batch in flight (or put back after a failure) is not missed.
        self._writing = threading.Lock()
        self._stop = False
        self._thread: threading.Thread | None = None

    def add(self, event_ids: Sequence[int]) -> None:
        """Mark ``event_ids`` published, now (eager) or with the next batch."""
        with self._cond:
            if self.interval > 0 and not self._stop:
                self._pending.extend(event_ids)
                self._start_or_wake()
                return
        # Eager, or after close(): in the caller's thread, at once.
        self._mark(event_ids)

    def _start_or_wake(self) -> None:
        """(Holding the condition) start the flusher, or wake it for a full batch."""
        if self._thread is None:
            # Started at the first mark: a publisher that never publishes
            # through a broker (embedded transport) runs no thread.
            self._thread = threading.Thread(target=self._run, name="pn-mark-flusher", daemon=True)
            self._thread.start()
            _track(self)
        if len(self._pending) >= self.max_batch:
            self._cond.notify_all()

    def pending(self) -> int:
        with self._cond:
            return len(self._pending)

    def flush(self) -> None:
        """Write every pending mark now, in the caller's thread; errors propagate.

        A batch that fails to be written is put back, first in line.
        """
        with self._writing:
            with self._cond:
                batch, self._pending = self._pending, []
            try:
                self._write(batch)
            except BaseException:
                self._put_back(batch)
                raise

    def close(self, timeout: float) -> bool:
        """Flush what is pending within ``timeout`` seconds; True when nothing is left.

        Whatever is left (the store is down or locked past the deadline) stays
        unmarked in the log: the relay re-sends it after its writer grace.
        """
        with self._cond:
            self._stop = True
            self._cond.notify_all()
            thread = self._thread
        _LIVE.discard(self)
        if thread is not None:
            thread.join(timeout)
        left = self.pending()
        if left or (thread is not None and thread.is_alive()):
            log.warning("publisher: %d published events left unmarked at close; the relay "
                        "will re-send them (subscribers drop duplicates)", left)
            return False
        return True

    def _run(self) -> None:
        failed = False
        while True:
            with self._cond:
                self._wait(full_batch_wakes=not failed)
                stopping = self._stop
            try:
                self.flush()
                failed = False
            except PartitionNotifyError as exc:
                # Kept for the next flush; meanwhile they are merely unmarked.
                log.warning("publisher: marking %d events published failed, will retry: %s",
                            self.pending(), exc)
                failed = True
            if stopping:
                return

    def _put_back(self, batch: list[int]) -> None:
        with self._cond:
            self._pending[:0] = batch

    def _wait(self, *, full_batch_wakes: bool) -> None:
        """Wait (holding the condition) for the interval, a stop or, unless the
        last write failed, a full batch."""
        deadline = time.monotonic() + self.interval
        while not self._stop and not (full_batch_wakes and len(self._pending) >= self.max_batch):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._cond.wait(left)

    def _write(self, batch: Sequence[int]) -> None:
        if batch:
            self._mark(batch)
