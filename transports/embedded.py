"""The embedded transport: the store's event log is the bus.

Publishing is already done when the log commits. Consumers follow the log
by event id; in the same process they are woken at once on commit, across
processes by the database's own signal (store/wakeups.py: PostgreSQL
LISTEN/NOTIFY, SQLite inotify) and, as the fallback that keeps a lost
wake-up from delaying a message for long, they read the log every
``max(poll_interval_seconds, WAKEUP_FALLBACK_SECONDS)``; every
``poll_interval_seconds`` where no wake-up is available (in-memory SQLite).
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Sequence
from typing import Any, ClassVar
from urllib.parse import urlsplit

from partition_notify.store import Store
from partition_notify.store.event_log import EventLog
from partition_notify.store.wakeups import (
    FALLBACK_SECONDS,
    Waker,
    cross_process_waker,
    reader_fallback,
)
from partition_notify.transports.base import Consumer, OnMessage, RawMessage, Transport
from sqlalchemy.engine import Engine

from partition_notify.contract import Envelope
from partition_notify.core.backoff import Backoff
from partition_notify.core.errors import ConfigurationError, PartitionNotifyError, SubscribeError
from partition_notify.core.redact import redact_url

log = logging.getLogger(__name__)

#: With cross-process wake-ups, readers still read the log at least this often.
WAKEUP_FALLBACK_SECONDS = FALLBACK_SECONDS
#: Events per read of the log.
READ_LIMIT = 1000


class CommitSignal:
    """Wakes in-process readers of a store's log when an append commits.

    Consumers wait on this instead of sleeping between polls. The generation
    tells a reader that a commit landed while it was reading, so it does not
    sleep through a notify it was not waiting for. One per event log (see
    :func:`commit_signal`), fed by the log's after-commit listener hook.
    """

    def __init__(self, engine: Engine | None = None) -> None:
        self._cond = threading.Condition()
        self._generation = 0
        self._engine = engine
        self._users = 0
        self._waker: Waker | None = None

    def generation(self) -> int:
        with self._cond:
            return self._generation

    def committed(self) -> None:
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    def wait(self, generation: int, timeout: float, stop: threading.Event) -> None:
        """Sleep up to ``timeout`` unless a commit landed after ``generation`` was read."""
        with self._cond:
            if self._generation == generation and not stop.is_set():
                self._cond.wait(timeout)

    def nudge(self) -> None:
        """Wake every waiter now (to notice a stop or new work)."""
        with self._cond:
            self._cond.notify_all()

    def acquire_wakeups(self) -> bool:
        """Share (start at first use) the wake-ups from other processes' commits.

        One waker per log and process however many readers follow it: one
        LISTEN connection, one inotify watch. True when one runs.
        """
        with self._cond:
            self._users += 1
            if self._waker is None and self._engine is not None:
                self._waker = cross_process_waker(self._engine, self.committed)
            return self._waker is not None

    def fallback(self, poll: float) -> float:
        """How long a reader waits for a wake-up before reading the log anyway: the
        wake-up fallback while the waker hears other processes' commits, else ``poll``
        (a PostgreSQL listener still asking its pooler, or told LISTEN is not heard)."""
        return reader_fallback(self._waker, poll)

    def release_wakeups(self, timeout: float) -> None:
        """The last reader's release stops the waker."""
        with self._cond:
            self._users = max(0, self._users - 1)
            waker = self._waker if self._users == 0 else None
            if waker is not None:
                self._waker = None
        if waker is not None:  # outside the lock: the waker's thread takes it to notify
            waker.close(timeout)


_signals: weakref.WeakKeyDictionary[EventLog, CommitSignal] = weakref.WeakKeyDictionary()
_signals_lock = threading.Lock()


def commit_signal(event_log: EventLog) -> CommitSignal:
    """The one signal of ``event_log``, registered on its after-commit hook at first use."""
    with _signals_lock:
        signal = _signals.get(event_log)
        if signal is None:
            signal = _signals[event_log] = CommitSignal(event_log.engine)
            event_log.add_listener(signal.committed)
        return signal


class EmbeddedTransport(Transport):
    scheme: ClassVar[str] = "embedded"
    uses_store_log: ClassVar[bool] = True

    def __init__(self, store: Store, *, poll_interval_seconds: float = 0.02,
                 cross_process_wakeups: bool = True) -> None:
        self.store = store
        self.poll_interval = poll_interval_seconds
        self.wakeups = cross_process_wakeups

    @classmethod
    def from_url(
        cls, url: str, *, store: Store | None = None, poll_interval_seconds: float = 0.02,
        cross_process_wakeups: bool = True, **_: Any,
    ) -> EmbeddedTransport:
        _refuse_parts(url)
        if store is None:
            raise ConfigurationError(
                f"transport URL {url!r}: the embedded transport needs the store (store=...), "
                "whose event log is its bus"
            )
        return cls(store, poll_interval_seconds=poll_interval_seconds,
                   cross_process_wakeups=cross_process_wakeups)

    def publish(self, envelopes: Sequence[Envelope], *, timeout: float) -> None:
        """Nothing to send: the envelopes were committed to the log."""

    def consumer(self, on_message: OnMessage) -> Consumer:
        return EmbeddedConsumer(self.store, on_message, self.poll_interval, self.wakeups)


def _refuse_parts(url: str) -> None:
    """``embedded://`` and nothing more: the store URL says where the log is, and
    settings tune it. A part that would be ignored is refused, as other transports
    refuse an option they do not know."""
    parts = urlsplit(url)
    given = [name for name, value in (("host", parts.netloc), ("path", parts.path),
                                      ("query", parts.query), ("fragment", parts.fragment))
             if value]
    if given:
        raise ConfigurationError(
            f"transport URL {redact_url(url)!r}: the embedded transport takes no "
            f"{', '.join(given)}; expected embedded:// (its bus is the store's event log: "
            "PN_STORE_URL says where, PN_POLL_INTERVAL_SECONDS how often it is read)")


class EmbeddedConsumer(Consumer):
    def __init__(self, store: Store, on_message: OnMessage, poll_interval: float,
                 wakeups: bool = True) -> None:
        self._store = store
        self._on_message = on_message
        self._poll = poll_interval
        self._topics: frozenset[str] = frozenset()
        self._cursor: int | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._signal = commit_signal(store.log)
        self._wakeups = wakeups
        self._acquired = False

    def subscribe(self, topics: Sequence[str], *, timeout: float) -> None:
        # Anything committed after this cursor is delivered; ids are assigned
        # in commit order, so nothing can appear below it later.
        try:
            cursor = self._store.log.max_event_id()
        except PartitionNotifyError as exc:
            raise SubscribeError(f"cannot read the event log: {exc}") from exc
        with self._lock:
            if self._cursor is None:
                self._cursor = cursor
            self._topics = self._topics | set(topics)
            # Two first subscribes at once must not start two readers.
            if self._thread is None:
                if self._wakeups:
                    self._acquired = True
                    self._signal.acquire_wakeups()
                self._thread = threading.Thread(
                    target=self._run, name="pn-embedded-consumer", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        # A failed read waits the poll interval, doubling up to 5 s.
        backoff = Backoff(initial=self._poll, cap=max(self._poll, 5.0))
        while not self._stop.is_set():
            with self._lock:
                cursor = self._cursor or 0
            generation = self._signal.generation()
            try:
                batch = self._store.log.events_after(cursor, READ_LIMIT)
            except PartitionNotifyError as exc:
                log.warning("embedded consumer: reading the log failed, retrying: %s", exc)
                backoff.wait(self._stop, backoff.failed())
                continue
            backoff.reset()
            # Topics are read after the batch: a topic whose subscribe() returned
            # before an event committed is then in the set. Read before, an event
            # committed during the read would be filtered out and skipped for good.
            with self._lock:
                topics = self._topics
            for ev in batch:
                if ev.topic in topics:
                    self._on_message(
                        RawMessage(
                            ev.topic,
                            {str(k): str(v) for k, v in ev.headers.items()},
                            ev.body.encode(),
                        )
                    )
            if batch:
                with self._lock:
                    self._cursor = batch[-1].event_id
            if len(batch) == READ_LIMIT:
                continue  # maybe more behind it
            # A short batch held everything committed before the read began; a commit
            # since then moved the generation, and the wait returns at once. Reading
            # again regardless cost a read per message, competing for the GIL with
            # the dispatcher (bench/cross_process_trace.py).
            fallback = self._signal.fallback(self._poll) if self._acquired else self._poll
            self._signal.wait(generation, fallback, self._stop)

    def close(self, timeout: float) -> None:
        self._stop.set()
        self._signal.nudge()
        with self._lock:
            thread, self._thread = self._thread, None  # a second close releases nothing
        if thread is not None:
            if self._acquired:
                self._signal.release_wakeups(timeout)
            thread.join(timeout)
