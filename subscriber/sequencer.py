"""Per-topic sequencing for a subscriber: drop repeats, fill holes from the event log.

Runs on the subscriber's dispatcher thread (one at a time), except
:meth:`Sequencer.follow`, which callers use before subscribing a topic.

* A topic is followed from the last ``topicSeq`` logged *before* the bus
  subscription; what is logged between that read and the broker's
  confirmation is read back from the log (:meth:`catch_up`), so no message
  falls between "too old for live" and "too new for the read".
* A number at or below the window's contiguous mark, or already seen above
  it, is a repeat: dropped, however many messages came before.
* A jump (``seq > high + 1``) reads the missing numbers from the log before
  handing on the new message, so order holds and nothing is skipped; a
  number the log does not hold is reported as a gap and given up.
* After a reconnect every followed topic is read from its mark onwards.
* Under ``PN_FOREIGN_MESSAGES=verify`` (the default) a message is handed on
  only when the log holds it (verify.py: read per batch of live messages,
  not per message); one it does not hold is dropped and counted, and never
  takes a number.
* Under ``deliver`` the next number is taken without a log read, so a
  foreign message can take it first. The message id each recent number was
  taken by is kept (:data:`RECENT_IDS` per topic): a repeat under another id
  is checked against the log, and the logged one is handed on instead of
  being dropped as a repeat.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from partition_notify.store import LoggedEvent, Store
from partition_notify.subscriber import subscription as _subscription
from partition_notify.subscriber.seq_window import SeqWindow
from partition_notify.subscriber.verify import MAX_SEQ, LogCheck, Verdict, Warner

from partition_notify.contract import AnyMessage
from partition_notify.core.errors import PartitionNotifyError

log = logging.getLogger(__name__)

#: Events per catch-up read from the log.
FILL_BATCH = 1000
#: After a failed catch-up read, seconds before a jump on that topic tries again.
FILL_RETRY_SECONDS = 1.0
#: Per topic, the message ids of the last numbers taken: a conflict further back
#: than this is not detected (the repeat is dropped, as before).
RECENT_IDS = 256


class Stats(Protocol):
    gaps: int
    missing_events: int
    duplicates: int
    filled: int
    fill_errors: int
    foreign: int


@dataclass(frozen=True, slots=True)
class Followed:
    """Topics a subscription started to follow, and the log's last event id before."""

    topics: tuple[str, ...]
    since_event_id: int


Hand = Callable[[AnyMessage], None]
Decode = Callable[[LoggedEvent], AnyMessage | None]
OnGap = Callable[[str, int, int], None]
#: What became of an offered message: handed on in order, a repeat (dropped),
#: to be handed on by message id (not tracked by number), or dropped unverified.
Outcome = Literal["handed", "repeat", "by_id", "dropped"]


class Sequencer:
    def __init__(self, store: Store, stats: Stats, hand: Hand, decode: Decode,
                 on_gap: OnGap | None, *, check: LogCheck | None = None,
                 recheck: Callable[[str], None] = lambda topic: None) -> None:
        """``check``: verify live messages against the log (None: deliver foreign ones
        by message id); ``recheck(topic)``: call :meth:`recheck` later, the log could
        not be read to verify a message of ``topic``."""
        self._store = store
        self._check = check
        self._recheck = recheck
        self._warner = Warner()
        self._stats = stats
        self._hand = hand
        self._decode = decode
        self._on_gap = on_gap
        self._lock = threading.Lock()
        self._windows: dict[str, SeqWindow] = {}
        self._retry_at: dict[str, float] = {}
        self._last_seq: dict[str, int] = {}  # topics without a window: detection only
        self._taken_by: dict[str, OrderedDict[int, str]] = {}  # topic -> seq -> message id

    # -- caller threads -------------------------------------------------------
    def follow(self, topics: Iterable[str]) -> Followed:
        """Start windows for topics not followed yet, at the log's last number.

        Returns those topics and the log's last event id, read *before* their
        numbers: whatever :meth:`catch_up_new` later finds after that id covers
        everything logged after the numbers, in one read however many topics.
        """
        with self._lock:
            new = sorted(t for t in set(topics) if t not in self._windows)
        if not new:
            return Followed((), 0)
        since = self._store.log.max_event_id()
        last = self._store.log.last_topic_seqs(new)
        with self._lock:
            fresh = tuple(t for t in new if t not in self._windows)
            for t in fresh:
                self._windows[t] = SeqWindow(last[t])
        return Followed(fresh, since)

    def unfollow(self, topics: Iterable[str]) -> None:
        """Forget windows :meth:`follow` just started (their subscription failed)."""
        with self._lock:
            for t in topics:
                self._windows.pop(t, None)

    def seen(self, topic: str, seq: int) -> bool | None:
        """None: the topic has no window (repeats are then caught by message id)."""
        w = self._windows.get(topic)
        return None if w is None else w.seen(seq)

    # -- dispatcher thread -----------------------------------------------------
    def prefetch(self, msgs: list[AnyMessage]) -> None:
        """Read the log once for a batch of live messages :meth:`offer` then checks."""
        if self._check is not None:
            self._check.prefetch(msgs, lambda t: w.high if (w := self._windows.get(t)) else None)

    def offer(self, msg: AnyMessage) -> Outcome:
        """Hand ``msg`` on unless it is a repeat or (verifying) the log does not hold it."""
        w = self._windows.get(msg.topic)
        if w is None:
            if not self._verified(msg):
                return "dropped"
            self._detect_only(msg)
            return "by_id"
        seq = msg.topic_seq
        if w.seen(seq):
            if self._check is None and self._displaces_unlogged(msg):
                return "by_id"  # its number is already taken
            self._stats.duplicates += 1
            return "repeat"
        if not self._verified(msg):
            return "dropped"
        if seq > MAX_SEQ:  # deliver: no log holds it (and SQL integers would overflow)
            return "by_id"
        if seq > w.high + 1 and any(w.holes(seq)):
            # Read through ``seq`` itself: a genuine message is in the log before it
            # is sent. One that is not (a foreign or forged number) must not move
            # the mark, or every genuine message below it would be dropped.
            read, at_seq = self._fill(msg.topic, w, upto=seq)
            if read:
                if at_seq is not None and at_seq.message_id == msg.message_id:
                    return "repeat"  # handed on from the log, in order
                if self._check is not None:
                    return "dropped"  # verified, so the log's copy took the number
                self._foreign(msg)
                return "by_id"
        self._accept(w, msg)
        return "handed"

    def _verified(self, msg: AnyMessage) -> bool:
        """Whether ``msg`` may be handed on: deliver mode, or the log holds it. Under
        ``deliver`` a number no log reaches is counted here and handed on by id."""
        if self._check is None:
            if msg.topic_seq > MAX_SEQ:
                self._foreign(msg)
            return True
        verdict = self._check.verdict(msg)
        if verdict is Verdict.FOREIGN:
            self._foreign(msg)
        elif verdict is Verdict.UNKNOWN:  # the failed read was counted
            self._recheck(msg.topic)
        return verdict is Verdict.GENUINE

    def recheck(self, topic: str) -> bool:
        """Hand on what the log holds after the topic's mark (messages that could not be
        verified were dropped, not given up); False when the log still cannot be read."""
        w = self._windows.get(topic)
        return w is None or self._fill(topic, w, upto=None, retry=True)[0]

    def _foreign(self, msg: AnyMessage) -> None:
        self._stats.foreign += 1
        self._warner.foreign(msg, "dropped" if self._check is not None else
                             "delivered by message id, the sequence is not moved")

    def _displaces_unlogged(self, msg: AnyMessage) -> bool:
        """Whether ``msg`` repeats a number taken by another message id and the log
        holds ``msg`` there: the earlier one was not genuine (forged, or foreign)."""
        recent = self._taken_by.get(msg.topic)
        taken = recent.get(msg.topic_seq) if recent is not None else None
        if recent is None or taken is None or taken == msg.message_id:
            return False
        try:
            logged = self._store.log.topic_events_after(msg.topic, msg.topic_seq - 1, 1,
                                                        upto_seq=msg.topic_seq)
        except PartitionNotifyError as exc:
            log.warning("cannot check topic %s seq %d against the event log; message %s "
                        "is dropped as a repeat: %s", msg.topic, msg.topic_seq,
                        msg.message_id, exc)
            return False
        genuine = self._decode(logged[0]) if logged else None
        if genuine is None or genuine.message_id != msg.message_id:
            return False
        recent[msg.topic_seq] = msg.message_id
        self._stats.foreign += 1
        log.warning("message %s had taken topic %s seq %d, which the event log holds as "
                    "message %s; that one is delivered too", taken, msg.topic,
                    msg.topic_seq, msg.message_id)
        return True

    def catch_up(self) -> None:
        """After a reconnect: read every followed topic from its mark to the log's end."""
        for topic in sorted(self._windows):
            self._fill(topic, self._windows[topic], upto=None, retry=True)

    def catch_up_new(self, followed: Followed) -> None:
        """What was logged for newly followed topics while the bus subscription started."""
        wanted = set(followed.topics)
        after = followed.since_event_id
        try:
            while wanted:
                batch = self._store.log.events_after(after, FILL_BATCH)
                for ev in batch:
                    if ev.topic in wanted:
                        self._take(ev.topic, self._windows[ev.topic], ev)
                if len(batch) < FILL_BATCH:
                    break
                after = batch[-1].event_id
        except PartitionNotifyError as exc:
            self._stats.fill_errors += 1
            log.warning("cannot read the event log after event %d for %s; the next jump or "
                        "reconnect fills it: %s", after, ", ".join(sorted(wanted)), exc)

    def _accept(self, w: SeqWindow, msg: AnyMessage) -> None:
        w.add(msg.topic_seq)
        recent = self._taken_by.setdefault(msg.topic, OrderedDict())
        recent[msg.topic_seq] = msg.message_id
        if len(recent) > RECENT_IDS:
            recent.popitem(last=False)
        if len(w.above) > _subscription.DEDUP_WINDOW:
            # Holes the log could not fill for a long time: give up the oldest.
            first, last = next(w.holes(min(w.above)))
            self._gap(msg.topic, first, last)
            w.give_up_through(last)
        self._hand(msg)

    def _fill(self, topic: str, w: SeqWindow, *, upto: int | None,
              retry: bool = False) -> tuple[bool, AnyMessage | None]:
        """Hand on what the log holds after the mark (through ``upto``).

        Returns whether the log could be read, and the message logged at ``upto``.
        """
        if not retry and time.monotonic() < self._retry_at.get(topic, 0.0):
            return False, None
        after = w.high
        at_upto: AnyMessage | None = None
        try:
            while True:
                batch = self._store.log.topic_events_after(topic, after, FILL_BATCH, upto_seq=upto)
                for ev in batch:
                    after = ev.topic_seq  # not w.high: numbers seen above it do not move it
                    msg = self._take(topic, w, ev)
                    if ev.topic_seq == upto:
                        at_upto = msg
                if len(batch) < FILL_BATCH:
                    break
        except PartitionNotifyError as exc:
            self._stats.fill_errors += 1
            self._retry_at[topic] = time.monotonic() + FILL_RETRY_SECONDS
            log.warning("cannot read topic %s from the event log after seq %d, will retry on "
                        "the next jump or reconnect: %s", topic, w.high, exc)
            return False, None
        return True, at_upto

    def _take(self, topic: str, w: SeqWindow, ev: LoggedEvent) -> AnyMessage | None:
        """One event read from the log, in topicSeq order for its topic."""
        if w.seen(ev.topic_seq):
            return None
        for first, last in list(w.holes(ev.topic_seq)):
            self._gap(topic, first, last)  # read in order, so not in the log: gone
        w.give_up_through(ev.topic_seq - 1)
        self._stats.filled += 1
        msg = self._decode(ev)
        if msg is None:
            w.add(ev.topic_seq)
        else:
            self._accept(w, msg)
        return msg

    def _gap(self, topic: str, first: int, last: int) -> None:
        self._stats.gaps += 1
        self._stats.missing_events += last - first + 1
        log.warning("gap on topic %s: sequence %d..%d is not in the event log", topic, first,
                    last)
        if self._on_gap is not None:
            try:
                self._on_gap(topic, first, last)
            except Exception:
                log.exception("on_gap callback failed")

    def _detect_only(self, msg: AnyMessage) -> None:
        last = self._last_seq.get(msg.topic)
        if last is not None and msg.topic_seq > last + 1:
            self._gap(msg.topic, last + 1, msg.topic_seq - 1)
        if last is None or msg.topic_seq > last:
            self._last_seq[msg.topic] = msg.topic_seq
