"""The embedded transport: the store's event log is the bus.

Publishing is already done when the log commits. Consumers follow the log
by event id; in the same process they are woken at once on commit, across
processes they poll every ``poll_interval_seconds``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any, ClassVar

from partition_notify.backoff import Backoff
from partition_notify.contract import Envelope
from partition_notify.errors import ConfigurationError, PartitionNotifyError, SubscribeError
from store import Store
from transports.base import Consumer, OnMessage, RawMessage, Transport

log = logging.getLogger(__name__)


class EmbeddedTransport(Transport):
    scheme: ClassVar[str] = "embedded"
    uses_store_log: ClassVar[bool] = True

    def __init__(self, store: Store, *, poll_interval_seconds: float = 0.02) -> None:
        self.store = store
        self.poll_interval = poll_interval_seconds

    @classmethod
    def from_url(
        cls, url: str, *, store: Store | None = None, poll_interval_seconds: float = 0.02,
        **_: Any,
    ) -> EmbeddedTransport:
        if store is None:
            raise ConfigurationError(
                f"transport URL {url!r}: the embedded transport needs the store (store=...), "
                "whose event log is its bus"
            )
        return cls(store, poll_interval_seconds=poll_interval_seconds)

    def publish(self, envelopes: Sequence[Envelope], *, timeout: float) -> None:
        """Nothing to send: the envelopes were committed to the log."""

    def consumer(self, on_message: OnMessage) -> Consumer:
        return EmbeddedConsumer(self.store, on_message, self.poll_interval)


class EmbeddedConsumer(Consumer):
    def __init__(self, store: Store, on_message: OnMessage, poll_interval: float) -> None:
        self._store = store
        self._on_message = on_message
        self._poll = poll_interval
        self._topics: frozenset[str] = frozenset()
        self._cursor: int | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def subscribe(self, topics: Sequence[str], *, timeout: float) -> None:
        # Anything committed after this cursor is delivered; ids are assigned
        # in commit order, so nothing can appear below it later.
        try:
            cursor = self._store.max_event_id()
        except PartitionNotifyError as exc:
            raise SubscribeError(f"cannot read the event log: {exc}") from exc
        with self._lock:
            if self._cursor is None:
                self._cursor = cursor
            self._topics = self._topics | set(topics)
            # Two first subscribes at once must not start two readers.
            if self._thread is None:
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
            with self._store.appended:
                generation = self._store.append_generation
            try:
                batch = self._store.events_after(cursor, 1000)
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
                continue
            with self._store.appended:
                if self._store.append_generation == generation and not self._stop.is_set():
                    self._store.appended.wait(self._poll)

    def close(self, timeout: float) -> None:
        self._stop.set()
        with self._store.appended:
            self._store.appended.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
