"""A subscription: the messages of some tables, de-duplicated, via callback or iterator."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator

from partition_notify.contract import AnyMessage
from partition_notify.core.errors import (
    HistoryMergeError,
    PartitionNotifyError,
    SubscriptionOverflowError,
    ValidationError,
)

log = logging.getLogger(__name__)

Callback = Callable[[AnyMessage], None]
#: Recent message ids remembered per subscription: the de-duplication where the
#: sequence number cannot be trusted (a topic not followed, a number the log
#: does not hold); also the bound on early-arrived numbers a topic's window
#: keeps (seq_window.py). Exactness comes from the numbers, not from this.
DEDUP_WINDOW = 200_000
#: Unread messages a subscription without a callback holds. A full queue makes
#: the dispatcher wait for the reader (backpressure, up to the subscriber's
#: timeout); then the subscription closes and ``get`` raises
#: :class:`SubscriptionOverflowError` after the queued messages: nothing is
#: dropped silently, and the event log still holds what was not delivered.
MAX_QUEUED = 10_000
#: Is (topic, seq) tracked by the subscriber's window, and if so already handled?
Seen = Callable[[str, int], bool | None]


def queue_bound(value: object) -> int:
    """A valid ``max_queued``: a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"max_queued must be a positive integer, got {value!r}")
    return value


class Subscription:
    """Messages for a set of tables, each delivered once.

    With a ``callback`` every message is handed to it on the subscriber's
    dispatcher thread (never two at a time); without one, iterate or call
    :meth:`get`. Until history has been merged, live messages are held back
    so history is delivered first.

    Without a callback at most ``max_queued`` messages wait unread. When the
    queue is full the dispatcher waits up to ``wait_seconds`` for the reader
    (a reader that keeps up loses nothing; meanwhile the subscriber's other
    subscriptions wait too); if it is still full the subscription closes,
    :attr:`overflowed` is set, and :meth:`get` raises
    :class:`SubscriptionOverflowError` once the queued messages are read. It
    names the first message not delivered: subscribe again (``history=True``)
    to resume from the event log, which still holds it.

    Live messages of followed topics reach this object already de-duplicated
    by sequence number (the subscriber's per-topic windows); only history can
    overlap them, and :meth:`merge_history` settles that by (topic, seq).
    """

    def __init__(
        self,
        tables: frozenset[tuple[str, str]],
        callback: Callback | None,
        accept: Callable[[AnyMessage], bool] | None = None,
        *,
        max_queued: int = MAX_QUEUED,
        wait_seconds: float = 10.0,
    ) -> None:
        self.tables = tables
        self.callback = callback
        self.accept = accept
        self.delivered = 0
        self.duplicates = 0
        self._seen: OrderedDict[str, None] = OrderedDict()
        # History delivered ahead of the live copy: (topic -> seqs) to drop once.
        self._skip: dict[str, set[int]] = {}
        self._queue: queue.Queue[AnyMessage | None] = queue.Queue(maxsize=max_queued)
        self._wait = wait_seconds
        #: Set when the reader fell ``max_queued`` behind (see the class docstring).
        self.overflowed = threading.Event()
        #: A SubscriptionOverflowError or HistoryMergeError: why it closed itself.
        self.error: PartitionNotifyError | None = None
        self._pending: list[tuple[AnyMessage, bool]] | None = []
        self.closed = False
        self._ready = threading.Event()
        self._on_close: Callable[[Subscription], None] | None = None

    # -- dispatcher side (one thread) ----------------------------------------
    def wants(self, msg: AnyMessage) -> bool:
        return (msg.db, msg.table) in self.tables and (self.accept is None or self.accept(msg))

    def offer_live(self, msg: AnyMessage, *, tracked: bool = False) -> None:
        """``tracked``: the subscriber's window already dropped repeats of this seq."""
        if self._pending is not None:
            self._pending.append((msg, tracked))
        else:
            self._deliver(msg, tracked)

    def merge_history(self, history: list[AnyMessage], seen: Seen,
                      catch_up: Callable[[], None]) -> None:
        """``catch_up`` (the log read since subscribing), then history first, then
        whatever arrived live meanwhile; duplicates dropped.

        The dispatcher logs a failure and goes on; the waits on this merge (subscribe,
        :meth:`messages`, ``tail``) would then never end: so it closes this
        subscription with a :class:`HistoryMergeError` that they raise
        (tests/subscriber/test_history_merge_failure.py)."""
        try:
            catch_up()
            if not self.closed:
                self._merge(history, seen)
        except Exception as exc:
            self._merge_failed(exc)
            raise

    def _merge(self, history: list[AnyMessage], seen: Seen) -> None:
        keys: set[tuple[str, int]] = set()
        for msg in history:
            if not self.wants(msg):
                continue
            key = (msg.topic, msg.topic_seq)
            if key in keys or msg.message_id in self._seen:
                self.duplicates += 1
                continue
            keys.add(key)
            self._remember(msg.message_id)
            self._emit(msg)
        pending, self._pending = self._pending or [], None
        for msg, tracked in pending:
            key = (msg.topic, msg.topic_seq)
            if tracked and key in keys:
                keys.discard(key)
                self.duplicates += 1
            else:
                self._deliver(msg, tracked)
        for topic, seq in keys:
            if seen(topic, seq) is False:  # its live copy is still to come: drop it then
                self._skip.setdefault(topic, set()).add(seq)
        self._ready.set()

    def _merge_failed(self, exc: Exception) -> None:
        names = sorted(f"{db}.{t}" for db, t in self.tables)
        error = HistoryMergeError(
            f"history of {', '.join(names)} could not be merged: {type(exc).__name__}: "
            f"{' '.join(str(exc).split())}; the subscription was closed. The event log "
            "still holds every message: subscribe again", tuple(names))
        error.__cause__ = exc
        self.error = error
        self._ready.set()
        self.close()

    def _deliver(self, msg: AnyMessage, tracked: bool) -> None:
        if self.closed:
            return
        if tracked:
            skip = self._skip.get(msg.topic)
            if skip and msg.topic_seq in skip:
                skip.discard(msg.topic_seq)
                self.duplicates += 1
                return
        # Sequence numbers are exact for the log's own messages; the bounded id
        # window still catches a foreign copy of one under another number.
        if msg.message_id in self._seen:
            self.duplicates += 1
            return
        self._remember(msg.message_id)
        self._emit(msg)

    def _remember(self, message_id: str) -> None:
        self._seen[message_id] = None
        if len(self._seen) > DEDUP_WINDOW:
            self._seen.popitem(last=False)

    def _emit(self, msg: AnyMessage) -> None:
        if self.closed:
            return
        if self.callback is None:
            if self._pending is not None and self._queue.full():
                # A history longer than the queue: its reader is subscribe's caller,
                # still waiting for the merge. Let it return and read (history first).
                self._ready.set()
            try:
                self._queue.put(msg, timeout=self._wait)
            except queue.Full:
                self._overflow(msg)
                return
            self.delivered += 1
            return
        self.delivered += 1
        try:
            self.callback(msg)
        except Exception:
            # One failing callback must not stop delivery to the others.
            log.exception("subscriber callback failed on event %s", msg.event_id)

    def _overflow(self, msg: AnyMessage) -> None:
        if self.closed:
            return  # closed by its reader while the dispatcher waited: nothing to tell
        names = ", ".join(sorted(f"{db}.{t}" for db, t in self.tables))
        self.error = SubscriptionOverflowError(
            f"subscription to {names}: {self._queue.maxsize} unread messages and no room "
            f"for {self._wait:g} s, so it was closed; not delivered: {type(msg).__name__} "
            f"{msg.db}.{msg.table} {getattr(msg, 'spec', '')} "
            f"(topic {msg.topic}, topicSeq {msg.topic_seq}) "
            "and everything after it. The event log still holds them: subscribe again "
            "(history=True), read with get() sooner, or pass a callback")
        log.error("%s", self.error)
        self.overflowed.set()
        self.close()

    # -- user side ------------------------------------------------------------
    @property
    def history_merged(self) -> bool:
        """All history handed to the callback or queued for :meth:`get`: what a reader
        draining "what is already there" waits for after a :class:`HistoryTimeout`.
        A closed subscription's never will be, so that counts as merged too; one whose
        merge failed is closed, its :attr:`error` a :class:`HistoryMergeError`."""
        return self._pending is None or self.closed

    def wait_ready(self, timeout: float) -> bool:
        """History merged, or (no callback) queued up to ``max_queued`` for the reader;
        :class:`HistoryMergeError` if the merge failed."""
        ready = self._ready.wait(timeout)
        if isinstance(self.error, HistoryMergeError):
            raise self.error
        return ready

    def get(self, timeout: float | None = None) -> AnyMessage | None:
        """Next message, or None when ``timeout`` passes or the subscription closes.

        After an overflow or a failed merge: the messages queued before it, then
        :class:`SubscriptionOverflowError` or :class:`HistoryMergeError` (every call).
        """
        try:  # after an overflow nothing more comes: do not wait
            msg = self._queue.get(timeout=0 if self.error is not None else timeout)
        except queue.Empty:
            if self.error is not None:
                raise self.error from None
            return None
        return msg if msg is not None or self.error is None else self.get(0)

    def __iter__(self) -> Iterator[AnyMessage]:
        while not self.closed or self.error is not None:
            msg = self.get(timeout=0.5)
            if msg is not None:
                yield msg

    def messages(self, timeout: float) -> Iterator[AnyMessage]:
        """Iterate what arrives within ``timeout`` seconds in all, then what is queued at
        its end (0: what is already there). After a :class:`HistoryTimeout` it also
        waits for the history still being merged, as ``tail --timeout`` does."""
        deadline = time.monotonic() + timeout
        # A late merge is an empty queue for now, not the end of the history.
        while (left := deadline - time.monotonic()) > 0 or not self.history_merged:
            # Past the deadline only a late history is waited for, a second at a time.
            msg = self.get(timeout=min(left, 1.0) if left > 0 else 1.0)
            if msg is not None:
                yield msg
        for _ in range(self._queue.qsize()):  # bounded: a fast stream cannot keep it going
            if (msg := self.get(timeout=0)) is None:
                return
            yield msg

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            # Wakes a blocked get(); a full queue has no waiting reader to wake.
            with contextlib.suppress(queue.Full):
                self._queue.put_nowait(None)
            if self._on_close is not None:
                self._on_close(self)
