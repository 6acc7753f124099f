"""Broker messages checked against the event log before they are handed on.

Anyone who can write a broker topic (a second deployment sharing the broker,
a principal a misconfigured ACL lets publish) can put a well-formed message
on it; a forged PARTITION_DONE would end a wait on data that is not
complete. Every genuine message is logged before it is sent, so under
``PN_FOREIGN_MESSAGES=verify`` (the default) a message is handed on only
when the log holds an event with its topic, topicSeq, message id and kind;
anything else is dropped, counted (``stats.foreign``) and logged, at most
:data:`WARN_BURST` lines per :data:`WARN_INTERVAL_SECONDS`.

Cost. One indexed look-up per message would be the hot path's only store
read: measured 66 us on SQLite and 275-355 us on a local PostgreSQL (p50; a
decode is 6 us), a ceiling of ~3,000 messages/s on PostgreSQL. Instead the
dispatcher takes every live message already queued (up to
:data:`VERIFY_BATCH`) and reads each topic's log range once, after its mark
through the highest number in the batch and at least :data:`READ_AHEAD`
numbers on; the events already logged but not yet arrived then verify
without a read (a writer's burst: one read for its whole commit). The read
takes numbers, ids and kinds, no bodies: 1.4 us (SQLite) / 1.9 us
(PostgreSQL) per event at 500 a read. A quiet subscriber pays one read per
message, when it has the time.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Protocol, TypeVar

from partition_notify.store import Store

from partition_notify.contract import AnyMessage
from partition_notify.core.errors import PartitionNotifyError

log = logging.getLogger(__name__)

#: Live messages the dispatcher takes off its queue for one round of log reads.
VERIFY_BATCH = 500
#: A check reads at least this many numbers past a topic's mark (read-ahead).
READ_AHEAD = 500
#: Events per page of a check's read.
PAGE = 1000
#: Read-ahead entries kept over all topics; past it the cache starts again.
MAX_CACHED = 100_000
#: Larger sequence numbers are foreign: no log gets there (SQL BIGINT is 2**63-1).
MAX_SEQ = 2**62
#: At most this many warnings about foreign messages per interval.
WARN_BURST = 10
WARN_INTERVAL_SECONDS = 60.0


class Verdict(Enum):
    GENUINE = "genuine"
    FOREIGN = "foreign"
    #: The log could not be read: neither handed on nor given up (read again later).
    UNKNOWN = "unknown"


Mark = Callable[[str], int | None]


class Errors(Protocol):
    fill_errors: int


class LogCheck:
    """What the event log holds at the numbers live messages claim; one dispatcher thread."""

    def __init__(self, store: Store, stats: Errors) -> None:
        self._store = store
        self._stats = stats
        self._logged: dict[str, dict[int, tuple[str, str]]] = {}  # topic -> seq -> (id, kind)
        self._unread: set[str] = set()  # topics whose last read failed
        self._cached = 0

    def prefetch(self, msgs: Iterable[AnyMessage], mark: Mark) -> None:
        """Read the log for every topic a number of ``msgs`` is not known for.

        ``mark(topic)`` is the number below which the subscriber has handled
        everything (None: the topic is not followed; then only the batch's
        own range is read, and nothing is kept past it).
        """
        if self._cached > MAX_CACHED:  # between batches: a batch's own reads stay
            self._logged.clear()
            self._cached = 0
        want: dict[str, tuple[int, int]] = {}  # topic -> (lowest, highest) unknown seq
        for m in msgs:
            known = self._logged.get(m.topic)
            if m.topic_seq > MAX_SEQ or (known is not None and m.topic_seq in known):
                continue
            lo, hi = want.get(m.topic, (m.topic_seq, m.topic_seq))
            want[m.topic] = (min(lo, m.topic_seq), max(hi, m.topic_seq))
        self._unread.difference_update(want)
        for topic, (lo, hi) in want.items():
            high = mark(topic)
            if high is None:  # not followed: only this batch's numbers, nothing kept
                self.forget(topic)
                self._read(topic, lo - 1, hi)
                continue
            if hi > high:  # pruned only here: a read is rare, a batch is not
                self._prune(topic, high)
                self._read(topic, high, max(hi, high + READ_AHEAD))

    def verdict(self, msg: AnyMessage) -> Verdict:
        if msg.topic_seq > MAX_SEQ:
            return Verdict.FOREIGN
        logged = self._logged.get(msg.topic, {}).get(msg.topic_seq)
        if logged is None:
            return Verdict.UNKNOWN if msg.topic in self._unread else Verdict.FOREIGN
        same = logged == (msg.message_id, msg.event_type)
        return Verdict.GENUINE if same else Verdict.FOREIGN

    def forget(self, topic: str) -> None:
        """Drop what was read for a topic that is not followed (nothing prunes it)."""
        self._cached -= len(self._logged.pop(topic, {}))

    def _prune(self, topic: str, high: int) -> None:
        known = self._logged.get(topic)
        if known:
            for seq in [s for s in known if s <= high]:
                del known[seq]
                self._cached -= 1

    def _read(self, topic: str, after: int, upto: int) -> None:
        known = self._logged.setdefault(topic, {})
        try:
            while True:
                page = self._store.log.topic_ids_after(topic, after, upto, PAGE)
                for seq, message_id, kind in page:
                    if seq not in known:
                        self._cached += 1
                    known[seq] = (message_id, kind)
                    after = seq
                if len(page) < PAGE:
                    return
        except PartitionNotifyError as exc:
            self._unread.add(topic)
            self._stats.fill_errors += 1
            log.warning(
                "cannot read topic %s from the event log to check live messages "
                "against it; they wait for the next read: %s",
                topic,
                exc,
            )


class Warner:
    """At most :data:`WARN_BURST` warnings per :data:`WARN_INTERVAL_SECONDS`; then one
    line saying how many were left out."""

    def __init__(self) -> None:
        self._since = time.monotonic()
        self._lines = 0
        self._left_out = 0

    def foreign(self, msg: AnyMessage, what: str) -> None:
        now = time.monotonic()
        if now - self._since >= WARN_INTERVAL_SECONDS:
            if self._left_out:
                log.warning(
                    "%d more messages the event log does not hold were not logged in the last %g s",
                    self._left_out,
                    WARN_INTERVAL_SECONDS,
                )
            self._since, self._lines, self._left_out = now, 0, 0
        if self._lines >= WARN_BURST:
            self._left_out += 1
            return
        self._lines += 1
        log.warning(
            "message %.80r (%s) on topic %s claims seq %d, which the event log does not hold: %s",
            msg.message_id,
            msg.event_type,
            msg.topic,
            msg.topic_seq,
            what,
        )


T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Queue(Protocol[T_co]):
    def get_nowait(self) -> T_co: ...


def drain(
    inbox: Queue[T], first: T, wanted: Callable[[T], bool], limit: int = VERIFY_BATCH
) -> tuple[list[T], list[T]]:
    """``first`` and the items of ``inbox`` already queued behind it that ``wanted``
    accepts, at most ``limit``; the item that ended the run comes back on its own
    (handled after the batch, so the inbox's order holds)."""
    batch, rest = [first], []
    while len(batch) < limit:
        try:
            item = inbox.get_nowait()
        except queue.Empty:
            break
        if not wanted(item):
            rest.append(item)
            break
        batch.append(item)
    return batch, rest
