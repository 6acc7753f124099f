"""The subscriber library schedulers use: live messages, history, and waits.

The late-subscriber protocol: **subscribe first**, wait for the bus
to confirm, **then** read the retention table, **then** de-duplicate. Reading
history first would lose whatever is published between the read and the
subscription.

Nothing lost, nothing doubled (issue #10): per topic the subscriber keeps a
window of the gap-free ``topicSeq`` numbers it handled (seq_window.py). A
repeat is dropped by number, in bounded memory; a jump, a reconnect or a new
topic is filled from the event log (``Store.log.topic_events_after``), so what
was published while the connection was down arrives whatever ``history=``
says; only a number the log no longer holds is reported through ``on_gap``.
Nothing spoofed: a broker message the log does not hold is dropped (verify.py).
Bounded: at most ``max_inbox`` items wait for the dispatcher; past that, live
messages are read from the event log instead (inbox_queue.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial

from partition_notify.store import Store, TableInfo
from partition_notify.subscriber import inbox
from partition_notify.subscriber.inbox_queue import MAX_INBOX, Inbox
from partition_notify.subscriber.refs import TableRef, table_keys
from partition_notify.subscriber.sequencer import FILL_RETRY_SECONDS, Followed, Sequencer
from partition_notify.subscriber.stats import SubscriberStats
from partition_notify.subscriber.subscription import (
    MAX_QUEUED,
    Callback,
    Subscription,
    queue_bound,
)
from partition_notify.subscriber.verify import LogCheck, drain
from partition_notify.transports import Consumer, RawMessage, Transport

from partition_notify.contract import AnyMessage, SetDoneMessage, decode, spec
from partition_notify.core import limits
from partition_notify.core.errors import (
    HistoryTimeout,
    MalformedMessageError,
    SubscribeError,
    UnknownTableError,
    WaitTimeout,
)

log = logging.getLogger(__name__)

OnGap = Callable[[str, int, int], None]
#: How often a wait for a table not registered yet reads the catalog again.
REGISTRATION_POLL_SECONDS = 1.0


class Subscriber:
    """Follows tables over one transport connection; one dispatcher thread runs callbacks."""

    def __init__(
        self,
        store: Store,
        transport: Transport,
        *,
        timeout_seconds: float = 10.0,
        on_gap: OnGap | None = None,
        foreign_messages: str = "verify",
        max_queued: int = MAX_QUEUED,
        max_inbox: int = MAX_INBOX,
    ) -> None:
        """``foreign_messages`` (PN_FOREIGN_MESSAGES): ``verify`` drops a broker message
        the log does not hold, ``deliver`` hands it on by id; embedded: nothing to verify.
        ``max_queued``: unread messages a callback-less subscription holds (Subscription);
        ``max_inbox``: items waiting for the dispatcher, beyond it live messages are
        read from the event log instead (inbox_queue.py)."""
        self.max_queued = queue_bound(max_queued)
        self.store = store
        self.transport = transport
        self.timeout = timeout_seconds
        self.on_gap = on_gap
        self.stats = SubscriberStats()
        #: What waits for the dispatcher: ``len()``, ``high_water``, ``offered``.
        self.inbox = Inbox(max_inbox, self.stats)
        self._subs: list[Subscription] = []
        verify = foreign_messages == "verify" and not transport.uses_store_log
        self._rechecks: set[str] = set()
        self._seq = Sequencer(store, self.stats, self._hand_on, inbox.decode_logged, on_gap,
                              check=LogCheck(store, self.stats) if verify else None,
                              recheck=self._recheck_later)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._consumer: Consumer | None = None
        self._dispatcher = threading.Thread(target=self._dispatch, name="pn-dispatcher",
                                            daemon=True)
        self._dispatcher.start()

    # -- public API -----------------------------------------------------------
    def subscribe(
        self,
        tables: TableRef | Iterable[TableRef],
        callback: Callback | None = None,
        *,
        history: bool = True,
        since: float | None = None,
    ) -> Subscription:
        """Follow ``tables``; with ``history`` also deliver retained set-done messages.

        ``tables``: ``"db.table"``, a ``("db", "table")`` pair of plain names,
        or several tables as a list or tuple of those, e.g.
        ``("sales.orders", "sales.returns")``; anything ambiguous (say
        ``("sales", "sales.returns")``) raises :class:`InvalidNameError`
        (see :mod:`partition_notify.subscriber.refs`).

        Returns once the subscription is confirmed by the bus and history is
        merged (history first, then live, each message once) or, without a
        callback, once ``max_queued`` of it waits for :meth:`~Subscription.get`;
        else raises :class:`HistoryTimeout` (``subscription`` still open). Whatever
        ``history`` says, a reconnect never loses what was published
        meanwhile: it is read back from the event log.
        """
        limits.callable_or_none(callback, field="callback")
        since_ts = 0.0 if since is None else limits.epoch_seconds(since, field="since")
        infos = self._tables(tables)

        def load() -> list[AnyMessage]:
            return self._decode_all(self.store.retention.set_done_history(infos, since_ts))

        return self._start(infos, callback, load if history else list)

    def wait_for_set_done(
        self, db: str, table: str, partial_spec: str | Mapping[str, object], timeout: float
    ) -> SetDoneMessage:
        """Block until a set-done covering ``partial_spec`` exists; return it.

        A coarser set-done satisfies a finer wait: ``datestamp=X`` done covers
        ``datestamp=X/region=us``. The newest retained one answers (a re-done set
        carries the newer revision), read however short ``timeout`` (0 too): it
        bounds only the wait for a live one; subscribing, the subscriber's own.
        A table not registered yet is waited for too (a scheduler may start
        before its producer's first run). Raises :class:`WaitTimeout` at the deadline.
        """
        timeout = limits.seconds(timeout, field="timeout")
        deadline = time.monotonic() + timeout
        info = self.wait_for_tables([(db, table)], timeout)[0]
        wanted = spec.coerce(partial_spec)
        spec.check_against(wanted, info.partition_keys, full=False, table=info.qualified)
        # Already done: no need to subscribe at all (and a zero timeout still answers).
        load = self._covering_loader(info, wanted, True)
        retained = [m for m in load() if isinstance(m, SetDoneMessage)]
        if retained:
            return retained[0]
        if timeout <= 0:
            raise self._timed_out(wanted, info, timeout)
        # Subscribing: the subscriber's timeout; a late-merged history answers by our deadline.
        try:
            sub = self._watch(info, wanted, None, None, True)
        except HistoryTimeout as late:
            sub = late.subscription
        try:
            msg = sub.get(timeout=max(deadline - time.monotonic(), 0.0))
            if isinstance(msg, SetDoneMessage):
                return msg
            if sub.closed:
                raise SubscribeError(f"the subscriber was closed while waiting for "
                                     f"{spec.canonical(wanted)!r} on {info.qualified}")
            raise self._timed_out(wanted, info, timeout)
        finally:
            sub.close()

    @staticmethod
    def _timed_out(wanted: spec.Spec, info: TableInfo, timeout: float) -> WaitTimeout:
        return WaitTimeout(f"no set-done covering {spec.canonical(wanted)!r} for "
                           f"{info.qualified} within {timeout:g} s")

    def watch_set_done(
        self,
        db: str,
        table: str,
        partial_spec: str | Mapping[str, object],
        callback: Callback | None = None,
        *,
        timeout: float | None = None,
        newest: bool = False,
    ) -> Subscription:
        """Subscribe to the set-dones covering ``partial_spec``, history first.

        The non-blocking half of :meth:`wait_for_set_done` (for event loops):
        returns once the subscription is confirmed (at most ``timeout`` or the
        connect timeout; else :class:`HistoryTimeout`); covering messages then go to
        ``callback`` on the dispatcher thread (or the subscription's queue). Close it when done.
        History: every retained one in event order; with ``newest`` the latest.
        """
        limits.callable_or_none(callback, field="callback")
        if timeout is not None:
            timeout = limits.seconds(timeout, field="timeout")
        info = self._tables([(db, table)])[0]
        return self._watch(info, spec.coerce(partial_spec), callback, timeout,
                           limits.flag(newest, field="newest"))

    def _watch(self, info: TableInfo, wanted: spec.Spec, callback: Callback | None,
               timeout: float | None, newest: bool) -> Subscription:
        spec.check_against(wanted, info.partition_keys, full=False, table=info.qualified)

        def covering(msg: AnyMessage) -> bool:
            return isinstance(msg, SetDoneMessage) and spec.covers(msg.partition_spec, wanted)

        load = self._covering_loader(info, wanted, newest)
        return self._start([info], callback, load, accept=covering, timeout=timeout)

    def _covering_loader(self, info: TableInfo, wanted: spec.Spec,
                         newest: bool) -> Callable[[], list[AnyMessage]]:
        candidates = spec.covering_specs(wanted)
        if newest:  # a re-done set's newer revision; the newest valid row (retained_check.py)
            return lambda: self._decode_all(
                [b for b in [self.store.retention.newest_covering(info, candidates)] if b])
        return lambda: self._decode_all(self.store.retention.set_done_covering(info, candidates))

    def set_done_history(self, db: str, table: str, since: float = 0.0) -> list[SetDoneMessage]:
        since = limits.epoch_seconds(since, field="since")
        info = self._tables([(db, table)])[0]
        msgs = self._decode_all(self.store.retention.set_done_history([info], since))
        return [m for m in msgs if isinstance(m, SetDoneMessage)]

    def is_partition_present(
        self, db: str, table: str, partition: str | Mapping[str, object]
    ) -> bool:
        info = self._tables([(db, table)])[0]
        s = spec.coerce(partition)
        spec.check_against(s, info.partition_keys, full=True, table=info.qualified)
        return self.store.catalog.partition(info, spec.canonical(s)) is not None

    def close(self) -> None:
        self._closed.set()  # ends a wait_for_tables in another thread
        for sub in list(self._subs):
            sub.close()
        if self._consumer is not None:
            self._consumer.close(self.timeout)
        self.inbox.put(None)
        self._dispatcher.join(self.timeout)

    def __enter__(self) -> Subscriber:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------
    def wait_for_tables(
        self, tables: TableRef | Iterable[TableRef], timeout: float | None
    ) -> list[TableInfo]:
        """The tables, once all are registered; :class:`WaitTimeout` after ``timeout``
        seconds (None: no limit). Registration is not logged as an event, so the
        catalog is read again every :data:`REGISTRATION_POLL_SECONDS`."""
        if timeout is not None:
            timeout = limits.seconds(timeout, field="timeout")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                return self._tables(tables)
            except UnknownTableError as exc:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise WaitTimeout(f"{exc} (waited {timeout:g} s for it)") from None
                self._closed.wait(REGISTRATION_POLL_SECONDS if left is None
                                  else min(left, REGISTRATION_POLL_SECONDS))
                if self._closed.is_set():
                    raise SubscribeError("the subscriber was closed while waiting for "
                                         "a table to be registered") from None

    def _tables(self, tables: TableRef | Iterable[TableRef]) -> list[TableInfo]:
        keys = table_keys(tables)
        if len(keys) == 1:
            return [self.store.catalog.get_table(*keys[0])]
        return self.store.catalog.get_tables(keys)

    def _start(
        self,
        infos: list[TableInfo],
        callback: Callback | None,
        load: Callable[[], list[AnyMessage]],
        accept: Callable[[AnyMessage], bool] | None = None,
        timeout: float | None = None,
    ) -> Subscription:
        limit = self.timeout if timeout is None else min(self.timeout, timeout)
        sub = Subscription(frozenset((t.db, t.name) for t in infos), callback, accept,
                           max_queued=self.max_queued, wait_seconds=self.timeout)
        sub._on_close = self._forget
        with self._lock:
            self._subs.append(sub)
            if self._consumer is None:
                self._consumer = self.transport.consumer(self._on_raw)
                self._consumer.on_reconnect = self._on_reconnect
            consumer = self._consumer
        topics = sorted({t.topic for t in infos})
        new = Followed((), 0)
        try:
            new = self._seq.follow(topics)  # 0. the log's last number, before the bus
            consumer.subscribe(topics, timeout=limit)  # 1. subscribe
            # 2. history; 3. the log since step 0, then de-dup (dispatcher thread)
            self.inbox.put(inbox.History(sub, load(), new))
        except BaseException:
            # A mark for a topic the bus never confirmed would skip what follows it.
            self._seq.unfollow(new.topics)
            sub.close()
            raise
        if not sub.wait_ready(limit):
            # Open on purpose: the history is still merged; silence said "caught up".
            raise HistoryTimeout(f"history of topic{'s'[:len(topics) - 1]} {', '.join(topics)} "
                                 f"not merged within {limit:g} s (the dispatcher is busy, e.g. "
                                 "in a slow callback); exc.subscription stays open and "
                                 "delivers it, history first", sub, tuple(topics), limit)
        return sub

    def _forget(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)

    def _on_raw(self, raw: RawMessage) -> None:
        self.inbox.live(raw)

    def _on_reconnect(self) -> None:
        # Anything published while we were away is in the event log.
        self.stats.reconnects += 1
        self.inbox.reconnected()

    def _decode_all(self, bodies: list[str]) -> list[AnyMessage]:
        return inbox.decode_stored(bodies, self.stats)

    def _dispatch(self) -> None:
        rest: list[inbox.Item] = []
        while True:
            item = rest.pop() if rest else self.inbox.get()
            if item is None:
                return
            try:
                if isinstance(item, inbox.Live):
                    batch, rest = drain(self.inbox, item, lambda i: isinstance(i, inbox.Live))
                    self._offer_all([m for i in batch if isinstance(i, inbox.Live)
                                     if (m := self._decode(i.raw)) is not None])
                elif isinstance(item, inbox.History):  # a failure ends the waits on it
                    item.sub.merge_history(item.messages, self._seq.seen,
                                           partial(self._seq.catch_up_new, item.followed))
                elif isinstance(item, inbox.Reconnected):
                    self._seq.catch_up()
                else:
                    self._rechecks.discard(item.topic)
                    if not self._seq.recheck(item.topic):
                        self._recheck_later(item.topic)
            except Exception:
                # The dispatcher must outlive any one bad item.
                log.exception("subscriber dispatcher failed on %s", type(item).__name__)

    def _recheck_later(self, topic: str) -> None:
        if topic not in self._rechecks and not self._closed.is_set():
            self._rechecks.add(topic)
            retry = threading.Timer(FILL_RETRY_SECONDS, self.inbox.recheck, (topic,))
            retry.daemon = True  # a closed subscriber's retry puts into a queue nobody reads
            retry.start()

    def _offer_all(self, msgs: list[AnyMessage]) -> None:
        """Live messages in arrival order, checked against one read of the log."""
        self._seq.prefetch(msgs)
        for msg in msgs:
            try:
                self._offer(msg)
            except Exception:
                log.exception("subscriber dispatcher failed on event %s", msg.event_id)

    def _offer(self, msg: AnyMessage) -> None:
        outcome = self._seq.offer(msg)
        if outcome == "by_id":
            self._hand_on(msg, tracked=False)
        elif outcome == "repeat":  # each subscription that wanted it counts it
            with self._lock:
                subs = list(self._subs)
            for sub in subs:
                if sub.wants(msg):
                    sub.duplicates += 1

    def _hand_on(self, msg: AnyMessage, *, tracked: bool = True) -> None:
        with self._lock:
            subs = list(self._subs)
        for sub in subs:
            if sub.wants(msg):
                sub.offer_live(msg, tracked=tracked)

    def _decode(self, raw: RawMessage) -> AnyMessage | None:
        self.stats.received += 1
        try:
            msg = decode(raw.body, raw.headers)
            if msg.topic != raw.topic:  # it would take a number of another topic's sequence
                raise MalformedMessageError(f"its body names topic {msg.topic!r}")
            return msg
        except MalformedMessageError as exc:
            self.stats.malformed += 1
            log.warning("skipping malformed message on topic %s: %s", raw.topic, exc)
            return None
