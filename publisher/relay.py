"""The relay: publishes logged events the broker has not yet acknowledged.

The event log is an outbox. A publish that failed after its commit (broker
down, process killed) leaves entries with ``published_at`` unset; the relay
leases them, sends them in event-id order, and marks them only after the
broker confirmed. A failed batch is retried whole, with capped exponential
backoff: nothing is skipped.

Leases (see :meth:`partition_notify.store.event_log.EventLog.lease_unpublished`)
cover a prefix of the log only, so with several ``serve`` processes one relay
works at a time and the others stand by; if it dies, its lease runs out and another takes over. An
entry younger than ``writer_grace_seconds`` is left alone because the writer
that logged it may still be waiting for the broker's receipt.

Guarantee: at least once, in event-id order per relay. A relay killed after
the broker's receipt but before the mark causes one re-send; subscribers drop
it by ``messageId``.

Poison messages. A message the broker refuses *for good* (the transport
raises :class:`MessageRejected` naming it: too large, not authorized, invalid
destination) never holds up other topics: the rest of its batch is marked
(what the broker confirmed) or retried, and the refused event is retried
alone, with the same capped backoff, while the later events of *its* topic
wait behind it (per-topic order holds). After ``max_attempts`` refusals it is
dead-lettered (:mod:`partition_notify.store.dead_letters`): logged at ERROR with its event id,
table, topic and error, counted in ``stats.dead_lettered``, and its topic
flows again. Subscribers see the hole as a ``topicSeq`` gap. Retriable
failures (broker down, timeout, connection lost) never count toward it.

Unverifiable rows. A row of the log whose headers and body are both damaged
(:attr:`LoggedEvent.unverifiable`, store/log_headers.py) has nothing a
subscriber could check it by: the relay never sends it. It is dead-lettered
as soon as it is leased, with the reason as its error, logged at ERROR once
and counted like a refused one; the rest of its batch goes on in order.
Repair the row, then redrive it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from partition_notify.store import LoggedEvent, Store
from partition_notify.store.dead_letters import DeadLetters
from partition_notify.transports import Transport

from partition_notify.contract import Envelope
from partition_notify.core.backoff import Backoff
from partition_notify.core.errors import ConfigurationError, MessageRejected, PartitionNotifyError
from partition_notify.settings import DEFAULT_MAX_ATTEMPTS

log = logging.getLogger(__name__)

#: Margin between the writer's publish deadline and the relay's first try.
WRITER_GRACE_MARGIN_SECONDS = 5.0


@dataclass(slots=True)
class RelayStats:
    published: int = 0
    failed_batches: int = 0
    consecutive_failures: int = 0
    #: The last failure's message (cleared by a published batch): readiness shows it.
    last_error: str = ""
    rejected: int = 0
    dead_lettered: int = 0


class Relay:
    def __init__(
        self,
        store: Store,
        transport: Transport,
        *,
        batch_size: int = 500,
        publish_timeout: float = 10.0,
        lease_seconds: float | None = None,
        writer_grace_seconds: float | None = None,
        max_backoff_seconds: float = 8.0,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        owner: str | None = None,
    ) -> None:
        lease = lease_seconds if lease_seconds is not None else max(60.0, 3 * publish_timeout)
        if lease <= publish_timeout:
            # A lease that ends while its publish may still succeed invites a second sender.
            raise ConfigurationError(
                f"relay lease_seconds ({lease:g}) must exceed publish_timeout ({publish_timeout:g})"
            )
        if batch_size <= 0 or max_backoff_seconds <= 0 or max_attempts <= 0:
            raise ConfigurationError(
                f"relay batch_size ({batch_size}), max_backoff_seconds "
                f"({max_backoff_seconds:g}) and max_attempts ({max_attempts}) must be positive"
            )
        self.store = store
        self.transport = transport
        self.batch_size = batch_size
        self.publish_timeout = publish_timeout
        self.lease_seconds = lease
        self.writer_grace = (
            writer_grace_seconds
            if writer_grace_seconds is not None
            else publish_timeout + WRITER_GRACE_MARGIN_SECONDS
        )
        self.max_backoff = max_backoff_seconds
        #: 0.5 s after the first failure, doubling up to max_backoff_seconds; the failure
        #: count is stats.consecutive_failures (and per topic, the dead-letter attempts).
        self._backoff = Backoff(initial=min(0.5, max_backoff_seconds), cap=max_backoff_seconds)
        self.max_attempts = max_attempts
        self.dead_letters = DeadLetters(store)
        self.owner = owner or f"relay-{uuid.uuid4().hex[:12]}"
        self.stats = RelayStats()
        #: Set to stop after the batch in flight (graceful shutdown).
        self.stopping = threading.Event()
        self._not_before = 0.0
        self._started = 0.0

    def run_once(self) -> int:
        """Publish what is pending, batch by batch; return how many were published.

        Two stages overlap: while the broker confirms batch N, the next batch is
        leased, and while it takes batch N+1, batch N is marked. Batch N+1 is
        only sent once N is confirmed, so per-topic order holds as before.
        """
        if self.transport.uses_store_log or time.monotonic() < self._not_before:
            return 0
        sent = 0
        with ThreadPoolExecutor(1, thread_name_prefix="relay-publish") as pool:
            batch = self._lease(0)
            flight = self._send(pool, batch)
            while flight is not None:
                # A full batch means more may be waiting: lease it while the broker works.
                nxt = self._lease(batch[-1].event_id) if len(batch) == self.batch_size else []
                try:
                    flight.result()
                except MessageRejected as exc:
                    sent += self._rejected(batch, exc)
                    if self.backoff() > 0:
                        break  # some of the batch failed in a way worth waiting for
                    # What was refused is out of the way. Lease afresh: the prefetched
                    # batch may hold later events of a refused event's topic.
                    batch = self._lease(0)
                    flight = self._send(pool, batch)
                    continue
                except PartitionNotifyError as exc:
                    self._failed(batch, exc)
                    break
                done, started = batch, self._started
                flight = self._send(pool, nxt)
                self._published(done)
                sent += len(done)
                self._log_published(done, started)
                batch = nxt
        return sent

    def _lease(self, after: int) -> list[LoggedEvent]:
        """The next batch, unverifiable rows taken out (dead-lettered: never sent).

        A batch shorter for it is not prefetched past; the next run goes on."""
        if self.stopping.is_set():
            return []
        got = self.store.log.lease_unpublished(
            self.owner,
            self.batch_size,
            self.lease_seconds,
            min_age_seconds=self.writer_grace,
            after_event_id=after,
        )
        bad = {e.event_id: e.unverifiable for e in got if e.unverifiable}
        if bad:
            self._refuse_unverifiable(bad)
        return [e for e in got if e.event_id not in bad] if bad else got

    def _refuse_unverifiable(self, bad: dict[int, str]) -> None:
        # One "refusal" is final: no broker could make such a row verifiable.
        for d in self.dead_letters.record_rejections(
                bad, max_attempts=1, backoff=self._backoff.delay):
            self.stats.dead_lettered += 1
            log.error("relay: dead-lettered event %d of table %s (topic %s, topicSeq %d) "
                      "without sending it: %s; later events of the topic flow (repair the "
                      "row, then redrive it: partition-notify dead-letters)",
                      d.event_id, d.table, d.topic, d.topic_seq, d.error,
                      extra={"pn_event": "relay.dead_lettered", "event_id": d.event_id,
                             "table": d.table, "topic": d.topic, "topic_seq": d.topic_seq,
                             "attempts": 0, "error": d.error, "relay": self.owner})

    def _send(self, pool: ThreadPoolExecutor, batch: list[LoggedEvent]) -> Future[None] | None:
        if not batch or self.stopping.is_set():
            return None
        self._started = time.monotonic()
        return pool.submit(
            self.transport.publish, [_envelope(e) for e in batch], timeout=self.publish_timeout
        )

    def _log_published(self, batch: list[LoggedEvent], started: float) -> None:
        log.info(
            "relay: published events %d..%d (%d) in %.3f s",
            batch[0].event_id,
            batch[-1].event_id,
            len(batch),
            time.monotonic() - started,
            extra={
                "pn_event": "relay.published",
                "first_event_id": batch[0].event_id,
                "last_event_id": batch[-1].event_id,
                "count": len(batch),
                "relay": self.owner,
            },
        )

    def _published(self, batch: list[LoggedEvent]) -> None:
        self.store.log.mark_published([e.event_id for e in batch])
        self.stats.published += len(batch)
        self.stats.consecutive_failures = 0
        self.stats.last_error = ""

    def _rejected(self, batch: list[LoggedEvent], exc: MessageRejected) -> int:
        """Mark what the broker took, count the refusals; return how many were published."""
        done = [e for e in batch if e.event_id in exc.confirmed]
        if done:
            self._published(done)
        by_id = {e.event_id: e for e in batch}
        rejected = {i: why for i, why in exc.rejected.items() if i in by_id}
        self.stats.rejected += len(rejected)
        for event_id, why in sorted(rejected.items()):
            log.warning("relay: the broker refused event %d (topic %s) for good: %s",
                        event_id, by_id[event_id].topic, why,
                        extra={"pn_event": "relay.rejected", "event_id": event_id,
                               "topic": by_id[event_id].topic, "error": why,
                               "relay": self.owner})
        dead = self.dead_letters.record_rejections(
            rejected, max_attempts=self.max_attempts, backoff=self._backoff.delay)
        for d in dead:
            self.stats.dead_lettered += 1
            log.error("relay: dead-lettered event %d of table %s (topic %s, topicSeq %d) after "
                      "%d refusals: %s; later events of the topic flow again (redrive or "
                      "discard it: partition-notify dead-letters)",
                      d.event_id, d.table, d.topic, d.topic_seq, d.attempts, d.error,
                      extra={"pn_event": "relay.dead_lettered", "event_id": d.event_id,
                             "table": d.table, "topic": d.topic, "topic_seq": d.topic_seq,
                             "attempts": d.attempts, "error": d.error, "relay": self.owner})
        # Unconfirmed events of a refused event's topic wait behind it (the lease
        # holds its topic back); any other unconfirmed one failed: back off.
        held = {by_id[i].topic for i in rejected}
        rest = [e for e in batch if e.event_id not in exc.confirmed
                and e.event_id not in rejected and e.topic not in held]
        if rest:
            self._failed(rest, exc)
        return len(done)

    def backoff(self) -> float:
        """Seconds until the next attempt is allowed (0 when not backing off)."""
        return max(0.0, self._not_before - time.monotonic())

    def _failed(self, batch: list[LoggedEvent], exc: Exception) -> None:
        self.stats.failed_batches += 1
        self.stats.consecutive_failures += 1
        self.stats.last_error = " ".join(str(exc).split())[:300]
        delay = self._backoff.delay(self.stats.consecutive_failures)
        self._not_before = time.monotonic() + delay
        # The message comes from our own error classes, which never carry credentials.
        log.warning(
            "relay: publishing events %d..%d failed (%s); retry in %.1f s",
            batch[0].event_id,
            batch[-1].event_id,
            exc,
            delay,
            extra={
                "pn_event": "relay.failed",
                "first_event_id": batch[0].event_id,
                "last_event_id": batch[-1].event_id,
                "count": len(batch),
                "error": type(exc).__name__,
                "retry_in": delay,
                "relay": self.owner,
            },
        )
        try:
            self.store.log.mark_failed([e.event_id for e in batch], str(exc))
        except PartitionNotifyError as err:
            # The lease runs out on its own; the entries will be retried then.
            log.warning("relay: could not record the failure: %s", err)


def _envelope(event: LoggedEvent) -> Envelope:
    headers = {str(k): str(v) for k, v in event.headers.items()}
    # The routing key is db.table; the topic may be shared by several tables.
    key = headers.get("PN_TABLE") or event.topic
    return Envelope(
        topic=event.topic,
        key=key,
        headers=headers,
        body=event.body.encode(),
        event_id=event.event_id,
        message_id=headers.get("PN_MESSAGE_ID", ""),
    )
