"""A subscription: the messages of some tables, de-duplicated, via callback or iterator."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator

from partition_notify.contract import AnyMessage

log = logging.getLogger(__name__)

Callback = Callable[[AnyMessage], None]
#: Recent message ids remembered per subscription: the de-duplication where the
#: sequence number cannot be trusted (a topic not followed, a number the log
#: does not hold); also the bound on early-arrived numbers a topic's window
#: keeps (seq_window.py). Exactness comes from the numbers, not from this.
DEDUP_WINDOW = 200_000
#: Is (topic, seq) tracked by the subscriber's window, and if so already handled?
Seen = Callable[[str, int], bool | None]


class Subscription:
    """Messages for a set of tables, each delivered once.

    With a ``callback`` every message is handed to it on the subscriber's
    dispatcher thread (never two at a time); without one, iterate or call
    :meth:`get`. Until history has been merged, live messages are held back
    so history is delivered first.

    Live messages of followed topics reach this object already de-duplicated
    by sequence number (the subscriber's per-topic windows); only history can
    overlap them, and :meth:`merge_history` settles that by (topic, seq).
    """

    def __init__(
        self,
        tables: frozenset[tuple[str, str]],
        callback: Callback | None,
        accept: Callable[[AnyMessage], bool] | None = None,
    ) -> None:
        self.tables = tables
        self.callback = callback
        self.accept = accept
        self.delivered = 0
        self.duplicates = 0
        self._seen: OrderedDict[str, None] = OrderedDict()
        # History delivered ahead of the live copy: (topic -> seqs) to drop once.
        self._skip: dict[str, set[int]] = {}
        self._queue: queue.Queue[AnyMessage | None] = queue.Queue()
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

    def merge_history(self, history: list[AnyMessage], seen: Seen) -> None:
        """History first, then whatever arrived live meanwhile; duplicates dropped."""
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
        self.delivered += 1
        if self.callback is None:
            self._queue.put(msg)
            return
        try:
            self.callback(msg)
        except Exception:
            # One failing callback must not stop delivery to the others.
            log.exception("subscriber callback failed on event %s", msg.event_id)

    # -- user side ------------------------------------------------------------
    def wait_ready(self, timeout: float) -> bool:
        return self._ready.wait(timeout)

    def get(self, timeout: float | None = None) -> AnyMessage | None:
        """Next message, or None when ``timeout`` passes or the subscription closes."""
        try:
            msg = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        return msg

    def __iter__(self) -> Iterator[AnyMessage]:
        while not self.closed:
            msg = self.get(timeout=0.5)
            if msg is not None:
                yield msg

    def messages(self, timeout: float) -> Iterator[AnyMessage]:
        """Iterate until ``timeout`` seconds pass with nothing new."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            msg = self.get(timeout=left)
            if msg is None:
                return
            yield msg

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._queue.put(None)
            if self._on_close is not None:
                self._on_close(self)
