"""The subscriber library schedulers use: live messages, history, and waits.

The late-subscriber protocol (seed 003): **subscribe first**, wait for the bus
to confirm, **then** read the retention table, **then** de-duplicate by
message id. Reading history first would lose whatever is published between
the read and the subscription.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from partition_notify.contract import AnyMessage, SetDoneMessage, decode, names, spec
from partition_notify.errors import (
    InvalidNameError,
    MalformedMessageError,
    SubscribeError,
    WaitTimeout,
)
from store import Store, TableInfo
from subscriber.subscription import Callback, Subscription
from transports import Consumer, RawMessage, Transport

log = logging.getLogger(__name__)

TableRef = str | tuple[str, str]
OnGap = Callable[[str, int, int], None]


@dataclass(slots=True)
class SubscriberStats:
    received: int = 0
    malformed: int = 0
    gaps: int = 0
    missing_events: int = 0
    reconnects: int = 0


@dataclass(frozen=True, slots=True)
class _Live:
    raw: RawMessage


@dataclass(frozen=True, slots=True)
class _History:
    sub: Subscription
    messages: list[AnyMessage]


class Subscriber:
    """Follows tables over one transport connection; one dispatcher thread runs callbacks."""

    def __init__(
        self,
        store: Store,
        transport: Transport,
        *,
        timeout_seconds: float = 10.0,
        on_gap: OnGap | None = None,
    ) -> None:
        self.store = store
        self.transport = transport
        self.timeout = timeout_seconds
        self.on_gap = on_gap
        self.stats = SubscriberStats()
        self._inbox: queue.Queue[_Live | _History | None] = queue.Queue()
        self._subs: list[Subscription] = []
        self._loaders: dict[int, Callable[[], list[AnyMessage]]] = {}
        self._last_seq: dict[str, int] = {}
        self._lock = threading.Lock()
        self._consumer: Consumer | None = None
        self._dispatcher = threading.Thread(
            target=self._dispatch, name="pn-dispatcher", daemon=True
        )
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

        Returns once the subscription is confirmed by the bus and history is
        merged (history first, then live, each message once).
        """
        infos = self._tables(tables)
        since_ts = since if since is not None else 0.0

        def load() -> list[AnyMessage]:
            return self._decode_all(self.store.set_done_history(infos, since_ts))

        return self._start(infos, callback, load if history else (lambda: []))

    def wait_for_set_done(
        self, db: str, table: str, partial_spec: str | Mapping[str, object], timeout: float
    ) -> SetDoneMessage:
        """Block until a set-done covering ``partial_spec`` exists; return it.

        A coarser set-done satisfies a finer wait: ``datestamp=X`` done covers
        ``datestamp=X/region=us``. Raises :class:`WaitTimeout` at the deadline.
        """
        deadline = time.monotonic() + timeout
        info = self._tables([(db, table)])[0]
        wanted = spec.coerce(partial_spec)
        sub = self._watch(info, wanted, None, timeout)
        try:
            left = deadline - time.monotonic()
            msg = sub.get(timeout=max(left, 0.0))
            if isinstance(msg, SetDoneMessage):
                return msg
            if sub.closed:
                raise SubscribeError(
                    f"the subscriber was closed while waiting for {spec.canonical(wanted)!r} "
                    f"on {info.qualified}"
                )
            raise WaitTimeout(
                f"no set-done covering {spec.canonical(wanted)!r} for {info.qualified} "
                f"within {timeout:g} s"
            )
        finally:
            sub.close()

    def watch_set_done(
        self,
        db: str,
        table: str,
        partial_spec: str | Mapping[str, object],
        callback: Callback | None = None,
        *,
        timeout: float | None = None,
    ) -> Subscription:
        """Subscribe to the set-dones covering ``partial_spec``, history first.

        The non-blocking half of :meth:`wait_for_set_done` (for event loops):
        returns once the subscription is confirmed (at most ``timeout`` or the
        connect timeout); covering messages then go to ``callback`` on the
        dispatcher thread (or to the subscription's queue). Close it when done.
        """
        info = self._tables([(db, table)])[0]
        return self._watch(info, spec.coerce(partial_spec), callback, timeout)

    def _watch(
        self,
        info: TableInfo,
        wanted: spec.Spec,
        callback: Callback | None,
        timeout: float | None,
    ) -> Subscription:
        spec.check_against(wanted, info.partition_keys, full=False, table=info.qualified)
        candidates = spec.covering_specs(wanted)

        def covering(msg: AnyMessage) -> bool:
            return isinstance(msg, SetDoneMessage) and spec.covers(msg.partition_spec, wanted)

        def load() -> list[AnyMessage]:
            return self._decode_all(self.store.set_done_covering(info, candidates))

        return self._start([info], callback, load, accept=covering, timeout=timeout)

    def set_done_history(self, db: str, table: str, since: float = 0.0) -> list[SetDoneMessage]:
        info = self._tables([(db, table)])[0]
        msgs = self._decode_all(self.store.set_done_history([info], since))
        return [m for m in msgs if isinstance(m, SetDoneMessage)]

    def is_partition_present(
        self, db: str, table: str, partition: str | Mapping[str, object]
    ) -> bool:
        info = self._tables([(db, table)])[0]
        s = spec.coerce(partition)
        spec.check_against(s, info.partition_keys, full=True, table=info.qualified)
        return self.store.partition(info, spec.canonical(s)) is not None

    def close(self) -> None:
        for sub in list(self._subs):
            sub.close()
        if self._consumer is not None:
            self._consumer.close(self.timeout)
        self._inbox.put(None)
        self._dispatcher.join(self.timeout)

    def __enter__(self) -> Subscriber:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------
    def _tables(self, tables: TableRef | Iterable[TableRef]) -> list[TableInfo]:
        refs: list[TableRef] = [tables] if isinstance(tables, str | tuple) else list(tables)
        keys: list[tuple[str, str]] = []
        for ref in refs:
            if isinstance(ref, str):
                db, sep, name = ref.partition(".")
                if not sep:
                    raise InvalidNameError(f"table {ref!r} must be written db.table")
            else:
                db, name = ref
            keys.append((names.db_name(db), names.table_name(name)))
        if not keys:
            raise InvalidNameError("subscribe needs at least one table")
        if len(keys) == 1:
            return [self.store.get_table(*keys[0])]
        return self.store.get_tables(keys)

    def _start(
        self,
        infos: list[TableInfo],
        callback: Callback | None,
        load: Callable[[], list[AnyMessage]],
        accept: Callable[[AnyMessage], bool] | None = None,
        timeout: float | None = None,
    ) -> Subscription:
        limit = self.timeout if timeout is None else min(self.timeout, timeout)
        sub = Subscription(frozenset((t.db, t.name) for t in infos), callback, accept)
        sub._on_close = self._forget
        with self._lock:
            self._subs.append(sub)
            self._loaders[id(sub)] = load
            if self._consumer is None:
                self._consumer = self.transport.consumer(self._on_raw)
                self._consumer.on_reconnect = self._on_reconnect
            consumer = self._consumer
        try:
            consumer.subscribe(sorted({t.topic for t in infos}), timeout=limit)  # 1. subscribe
            self._inbox.put(_History(sub, load()))  # 2. history, 3. de-dup in merge_history
        except BaseException:
            sub.close()
            raise
        sub.wait_ready(limit)
        return sub

    def _forget(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)
            self._loaders.pop(id(sub), None)

    def _on_raw(self, raw: RawMessage) -> None:
        self._inbox.put(_Live(raw))

    def _on_reconnect(self) -> None:
        # Anything set done while we were away is in the retention table.
        self.stats.reconnects += 1
        with self._lock:
            pending = [(s, self._loaders[id(s)]) for s in self._subs if id(s) in self._loaders]
        for sub, load in pending:
            try:
                self._inbox.put(_History(sub, load()))
            except Exception:
                log.exception("re-reading history after reconnect failed")

    def _decode_all(self, bodies: list[str]) -> list[AnyMessage]:
        out: list[AnyMessage] = []
        for body in bodies:
            try:
                out.append(decode(body.encode()))
            except MalformedMessageError as exc:
                self.stats.malformed += 1
                log.warning("skipping malformed stored message: %s", exc)
        return out

    def _dispatch(self) -> None:
        while True:
            item = self._inbox.get()
            if item is None:
                return
            if isinstance(item, _History):
                if not item.sub.closed:
                    item.sub.merge_history(item.messages)
                continue
            msg = self._decode_live(item.raw)
            if msg is None:
                continue
            with self._lock:
                subs = list(self._subs)
            for sub in subs:
                if sub.wants(msg):
                    sub.offer_live(msg)

    def _decode_live(self, raw: RawMessage) -> AnyMessage | None:
        self.stats.received += 1
        try:
            msg = decode(raw.body, raw.headers)
        except MalformedMessageError as exc:
            self.stats.malformed += 1
            log.warning("skipping malformed message on topic %s: %s", raw.topic, exc)
            return None
        self._check_gap(msg)
        return msg

    def _check_gap(self, msg: AnyMessage) -> None:
        last = self._last_seq.get(msg.topic)
        if last is not None and msg.topic_seq > last + 1:
            self.stats.gaps += 1
            self.stats.missing_events += msg.topic_seq - last - 1
            log.warning(
                "gap on topic %s: sequence %d..%d not received",
                msg.topic,
                last + 1,
                msg.topic_seq - 1,
            )
            if self.on_gap is not None:
                self.on_gap(msg.topic, last + 1, msg.topic_seq - 1)
        if last is None or msg.topic_seq > last:
            self._last_seq[msg.topic] = msg.topic_seq
