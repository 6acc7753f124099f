"""The queue between a transport's consumer thread and the subscriber's dispatcher.

Bounded, and nothing is lost to the bound. The event log is the truth: every
genuine message is logged before it is sent, and the dispatcher can read a
topic from the log after the last number it handed on (``inbox.Recheck``).
So when ``bound`` items wait, a live message is not queued: it is dropped,
counted (``stats.coalesced``), and one ``Recheck`` of its topic is queued
instead; every further live message of that topic is dropped too until the
dispatcher takes that ``Recheck`` off the queue. Those messages were logged
before they arrived, so the log read that follows delivers them, in order,
and the per-topic window (seq_window.py) drops any copy that arrives again.

The consumer thread never waits for room: a broker client's thread held
back misses STOMP heart-beats or Kafka's ``max.poll.interval``.

What waits at most: ``bound`` items, plus one ``Recheck`` per followed topic,
one ``Reconnected`` (a second one is the same log read), one ``History`` per
``subscribe`` call the dispatcher has not reached yet (its caller waits for it,
up to the subscriber's timeout), and the closing ``None``.

Under ``PN_FOREIGN_MESSAGES=deliver`` a message the log does not hold (another
producer's, on purpose) cannot be read back: one dropped while the inbox is
full is lost, and counted in ``coalesced`` with the genuine ones.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from typing import Protocol

from partition_notify.subscriber.inbox import Item, Live, Recheck, Reconnected
from partition_notify.transports import RawMessage

from partition_notify.core.errors import ValidationError

log = logging.getLogger(__name__)

#: Items the inbox holds before live messages are coalesced into log reads
#: (``Subscriber(max_inbox=...)``). A live item is one broker message (~1 KB).
MAX_INBOX = 10_000


class Stats(Protocol):
    coalesced: int
    inbox_high_water: int


def inbox_bound(value: object) -> int:
    """A valid ``max_inbox``: a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"max_inbox must be a positive integer, got {value!r}")
    return value


class Inbox:
    """Items for the dispatcher, in order; any thread puts, one thread gets."""

    def __init__(self, bound: int, stats: Stats) -> None:
        self.bound = inbox_bound(bound)
        self._stats = stats
        self._items: deque[Item] = deque()
        self._cond = threading.Condition()
        self._rechecks: set[str] = set()  # topics with a Recheck queued
        self._reconnect_queued = False
        #: Live messages the consumer handed in (queued or coalesced).
        self.offered = 0

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    @property
    def high_water(self) -> int:
        """The most items ever queued at once."""
        return self._stats.inbox_high_water

    def live(self, raw: RawMessage) -> None:
        """From the consumer thread; never waits."""
        with self._cond:
            self.offered += 1
            if raw.topic in self._rechecks:
                self._stats.coalesced += 1
                self._cond.notify_all()
                return
            if len(self._items) < self.bound:
                self._append(Live(raw))
                return
            self._stats.coalesced += 1
            if not self._rechecks:  # once per episode, not once per topic
                log.warning("subscriber inbox full (%d items): live messages are dropped "
                            "and read from the event log instead, first on topic %s",
                            len(self._items), raw.topic)
            self._queue_recheck(raw.topic)

    def recheck(self, topic: str) -> None:
        """Read ``topic`` from the log after its mark; at most one queued per topic."""
        with self._cond:
            if topic not in self._rechecks:
                self._queue_recheck(topic)

    def reconnected(self) -> None:
        """Read every followed topic from the log; at most one queued."""
        with self._cond:
            if not self._reconnect_queued:
                self._reconnect_queued = True
                self._append(Reconnected())

    def put(self, item: Item) -> None:
        """A subscription's history or the closing ``None``: always queued."""
        with self._cond:
            self._append(item)

    def _queue_recheck(self, topic: str) -> None:
        self._rechecks.add(topic)
        self._append(Recheck(topic))

    def _append(self, item: Item) -> None:
        self._items.append(item)
        if len(self._items) > self._stats.inbox_high_water:
            self._stats.inbox_high_water = len(self._items)
        self._cond.notify_all()

    def wait_offered(self, n: int, timeout: float) -> bool:
        """Wait until the consumer handed in ``n`` live messages (tests, tools)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.offered >= n, timeout)

    def get(self) -> Item:
        with self._cond:
            while not self._items:
                self._cond.wait()
            return self._take()

    def get_nowait(self) -> Item:
        with self._cond:
            if not self._items:
                raise queue.Empty
            return self._take()

    def _take(self) -> Item:
        item = self._items.popleft()
        # Cleared before the dispatcher reads the log: a message arriving from now
        # on is queued behind this item; one dropped before was logged before it.
        if isinstance(item, Recheck):
            self._rechecks.discard(item.topic)
        elif isinstance(item, Reconnected):
            self._reconnect_queued = False
        return item
