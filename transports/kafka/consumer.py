"""One kafka-python consumer and one poll thread for any number of topics.

Default (no ``group_id``): no consumer group. ``subscribe`` assigns every
partition of the new topics to the same ``KafkaConsumer`` and pins each at
its end offset (ListOffsets) before it returns, so the subscription starts at
a known offset and the subscriber's history read covers everything before
it. Adding topics later keeps the positions of those already followed. A
topic that does not exist yet (and could not be created) is remembered and
assigned from its first offset when it appears: everything in it is newer
than the subscription.

With ``group_id``: ``KafkaConsumer.subscribe`` and group-managed partitions,
offsets auto-committed; ``subscribe`` returns once a rebalance that includes
the new topics completed and the positions are known. A message is committed
once handed to the subscriber, not once its callback ran (at-most-once for
that window); set-done messages are re-read from the store on every start.

kafka-python's consumer is not thread-safe, so only the poll thread touches
it after creation; ``subscribe`` hands it a request and waits.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import kafka.errors as kerrors
from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from partition_notify.transports.base import Consumer, OnMessage, RawMessage
from partition_notify.transports.kafka._sasl import check_sasl
from partition_notify.transports.kafka._topics import TopicAdmin, client_config, describe
from partition_notify.transports.kafka.config import KafkaEndpoint

from partition_notify.core.backoff import Backoff
from partition_notify.core.errors import ConnectError, SubscribeError, TransportError

if TYPE_CHECKING:
    from kafka.consumer.fetcher import ConsumerRecord

log = logging.getLogger(__name__)

#: How long one poll blocks; bounds how late a subscribe request or close is seen.
POLL_MS = 100
#: How often topics that did not exist at subscribe time are looked for (doubling up
#: to the maximum).
PENDING_CHECK_SECONDS = 1.0
PENDING_CHECK_MAX_SECONDS = 30.0
#: A failed poll is retried after this long (the driver reconnects by itself).
POLL_RETRY_SECONDS = 1.0
#: Retry interval while the driver learns partition leaders for end offsets.
END_OFFSET_RETRY_SECONDS = 0.05


@dataclass(eq=False)
class _Request:
    topics: frozenset[str]
    deadline: float
    #: Looked up by the caller; None: the poll thread asks the consumer.
    partitions: dict[str, set[int]] | None = None
    done: threading.Event = field(default_factory=threading.Event)
    error: TransportError | None = None
    generation: int = 0

    def finish(self, error: TransportError | None = None) -> None:
        self.error = error
        self.done.set()


class _Rebalances(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.generation = 0

    def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, assigned: Collection[TopicPartition]) -> None:
        self.generation += 1
        log.info("kafka: consumer group assigned %d partition(s)", len(assigned))


class KafkaTopicConsumer(Consumer):
    def __init__(self, endpoint: KafkaEndpoint, admin: TopicAdmin,
                 on_message: OnMessage) -> None:
        self.endpoint = endpoint
        self._admin = admin
        self._on_message = on_message
        self._kc: KafkaConsumer | None = None
        self._requests: queue.Queue[_Request] = queue.Queue()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._close_timeout = endpoint.connect_timeout
        # Owned by the poll thread from here on.
        self._following: set[str] = set()
        self._pending: set[str] = set()
        self._next_pending_check = 0.0
        self._pending_checks = Backoff(initial=PENDING_CHECK_SECONDS, cap=PENDING_CHECK_MAX_SECONDS)
        self._rebalances = _Rebalances()
        self._awaiting: list[_Request] = []

    # -- caller side --------------------------------------------------------------
    def subscribe(self, topics: Sequence[str], *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        wanted = frozenset(topics)
        if not wanted:
            return
        self._start(deadline)
        # Metadata for just these topics; the consumer itself could only ask for all.
        partitions = self._admin.partitions(wanted, deadline)
        request = _Request(wanted, deadline, partitions)
        self._requests.put(request)
        if not request.done.wait(max(deadline - time.monotonic(), 0.0)):
            raise SubscribeError(f"kafka: subscription to {_few(wanted)} not confirmed within "
                                 f"{timeout:g} s")
        if request.error is not None:
            raise request.error

    def close(self, timeout: float) -> None:
        self._close_timeout = timeout
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                log.warning("kafka: consumer thread did not stop within %.1f s", timeout)
        elif self._kc is not None:
            self._close_client(timeout)

    def _start(self, deadline: float) -> None:
        with self._lock:
            if self._stop.is_set():
                raise SubscribeError("kafka consumer is closed")
            if self._failure is not None:
                raise SubscribeError(f"kafka consumer stopped: {describe(self._failure)}")
            if self._thread is not None:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise SubscribeError("kafka: no time left to connect a consumer")
            check_sasl(self.endpoint, deadline)
            try:
                self._kc = KafkaConsumer(**self._config(left))
            except kerrors.KafkaError as exc:
                raise ConnectError(f"kafka: cannot connect a consumer to "
                                   f"{','.join(self.endpoint.bootstrap)}: {describe(exc)}"
                                   ) from exc
            self._thread = threading.Thread(target=self._run, name="pn-kafka-consumer",
                                            daemon=True)
            self._thread.start()

    def _config(self, timeout: float) -> dict[str, object]:
        config = client_config(self.endpoint, min(timeout, self.endpoint.connect_timeout))
        config["fetch_max_wait_ms"] = self.endpoint.fetch_max_wait_ms
        if self.endpoint.group_id is None:
            # Offsets are pinned explicitly; 'earliest' only applies when a pinned
            # offset fell out of retention: read what is left rather than skip it.
            config.update(group_id=None, enable_auto_commit=False, auto_offset_reset="earliest")
        else:
            # A JoinGroup can block for a whole rebalance: keep the driver's request timeout.
            config.pop("request_timeout_ms")
            config.update(group_id=self.endpoint.group_id, enable_auto_commit=True,
                          auto_commit_interval_ms=1000,
                          auto_offset_reset=self.endpoint.auto_offset_reset)
            if self.endpoint.session_timeout_ms is not None:
                config["session_timeout_ms"] = self.endpoint.session_timeout_ms
                config["heartbeat_interval_ms"] = max(self.endpoint.session_timeout_ms // 3, 100)
        return config

    # -- poll thread ----------------------------------------------------------------
    @property
    def _client(self) -> KafkaConsumer:
        """The driver's consumer: made by ``subscribe`` before the poll thread starts."""
        kc = self._kc
        assert kc is not None, "kafka consumer used before it connected"
        return kc

    def _run(self) -> None:
        # The driver reconnects by itself; a failed poll is retried after a fixed 1 s.
        backoff = Backoff(initial=POLL_RETRY_SECONDS, cap=POLL_RETRY_SECONDS)
        try:
            while not self._stop.is_set():
                self._serve_requests()
                if self._pending and time.monotonic() >= self._next_pending_check:
                    self._adopt_pending()
                try:
                    batch = self._client.poll(timeout_ms=POLL_MS)
                except Exception as exc:  # the driver reconnects by itself: keep polling
                    log.warning("kafka: poll failed, retrying: %s", describe(exc))
                    backoff.wait(self._stop, backoff.failed())
                    continue
                for records in batch.values():
                    for record in records:
                        self._deliver(record)
                if self._awaiting:
                    self._finish_group_requests()
        except BaseException as exc:
            self._failure = exc
            log.exception("kafka: consumer thread stopped")
        finally:
            self._fail_open_requests(SubscribeError("kafka consumer closed"))
            self._close_client(self._close_timeout)

    def _deliver(self, record: ConsumerRecord) -> None:
        headers = {str(k): v.decode("utf-8", "replace") if isinstance(v, bytes) else ""
                   for k, v in (record.headers or [])}
        try:
            self._on_message(RawMessage(record.topic, headers, record.value or b""))
        except Exception:
            log.exception("kafka: message handler failed on %s offset %s", record.topic,
                          record.offset)

    def _serve_requests(self) -> None:
        batch: list[_Request] = []
        while True:
            try:
                batch.append(self._requests.get_nowait())
            except queue.Empty:
                break
        if not batch:
            return
        new = frozenset().union(*(r.topics for r in batch)) - self._following - self._pending
        deadline = max(r.deadline for r in batch)
        known: dict[str, set[int]] | None = {}
        for request in batch:
            if known is not None and request.partitions is not None:
                known.update(request.partitions)
            else:
                known = None
        try:
            if self.endpoint.group_id is None:
                if new:
                    self._assign(new, deadline, known)
                for request in batch:
                    request.finish()
            else:
                self._join(new, batch)
        except Exception as exc:  # the driver's, mapped; the poll thread must live on
            error = SubscribeError(f"kafka: subscribing to {_few(new)} failed: {describe(exc)}")
            error.__cause__ = exc
            for request in batch:
                request.finish(error)

    def _existing(self, topics: frozenset[str]) -> dict[str, set[int]]:
        """Partitions of those ``topics`` the cluster has now (metadata of *every* topic)."""
        names = self._client.topics()
        return {t: parts for t in topics & names if (parts := self._client.partitions_for_topic(t))}

    def _assign(self, topics: frozenset[str], deadline: float,
                known: dict[str, set[int]] | None) -> None:
        if known is None:
            found = self._existing(topics)
        else:
            found = {t: parts for t, parts in known.items() if t in topics}
        new = [TopicPartition(t, p) for t, parts in sorted(found.items()) for p in sorted(parts)]
        if new:
            ends = self._end_offsets(new, deadline)
            self._client.assign(sorted(self._client.assignment() | set(new)))
            for tp in new:
                self._client.seek(tp, ends[tp])
        self._following.update(found)
        missing = topics - set(found)
        if missing:
            log.info("kafka: topic(s) %s do not exist yet; following them from their first "
                     "offset once they appear", _few(missing))
            self._pending.update(missing)
            self._pending_checks.reset()
            self._next_pending_check = time.monotonic() + self._pending_checks.delay(0)

    def _end_offsets(self, partitions: list[TopicPartition],
                     deadline: float) -> dict[TopicPartition, int]:
        ends: dict[TopicPartition, int] = {}
        todo = partitions
        retry = Backoff(initial=END_OFFSET_RETRY_SECONDS, cap=END_OFFSET_RETRY_SECONDS)
        while True:
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0:
                raise kerrors.KafkaTimeoutError(
                    f"no end offset for {len(todo)} partition(s), e.g. {todo[0]}")
            # kafka-python 3.0.12 drops partitions whose leader it does not know yet when
            # others are known (then KeyErrors); it has asked for their metadata: retry.
            with contextlib.suppress(KeyError):
                ends.update(self._client.end_offsets(todo, timeout_ms=left_ms))
            todo = [tp for tp in todo if tp not in ends]
            if not todo:
                return ends
            retry.wait(self._stop, retry.failed(), deadline)

    def _adopt_pending(self) -> None:
        # Each check fetches the metadata of every topic in the cluster: back off.
        self._next_pending_check = time.monotonic() + self._pending_checks.failed()
        try:
            found = self._existing(frozenset(self._pending))
        except Exception as exc:  # retried at the next check
            log.warning("kafka: looking for pending topics failed: %s", describe(exc))
            return
        new = [TopicPartition(t, p) for t, parts in sorted(found.items()) for p in sorted(parts)]
        if not new:
            return
        self._client.assign(sorted(self._client.assignment() | set(new)))
        self._client.seek_to_beginning(*new)
        self._following.update(found)
        self._pending.difference_update(found)

    # -- consumer-group mode ----------------------------------------------------------
    def _join(self, new: frozenset[str], batch: list[_Request]) -> None:
        for request in batch:
            request.generation = self._rebalances.generation
        if new or not self._rebalances.generation:
            self._following.update(new)
            self._client.subscribe(topics=sorted(self._following), listener=self._rebalances)
            self._awaiting.extend(batch)
        else:
            for request in batch:
                request.finish()

    def _finish_group_requests(self) -> None:
        now = time.monotonic()
        generation = self._rebalances.generation
        still: list[_Request] = []
        for request in self._awaiting:
            if generation > request.generation and self._all_exist(request.topics):
                for tp in self._client.assignment():
                    self._position(tp, request.deadline)  # known before subscribe returns
                request.finish()
            elif now >= request.deadline:
                request.finish(SubscribeError(
                    f"kafka: consumer group {self.endpoint.group_id!r} did not assign "
                    f"{_few(request.topics)} in time (do the topics exist?)"))
            else:
                still.append(request)
        self._awaiting = still

    def _position(self, tp: TopicPartition, deadline: float) -> int:
        left_ms = max(int((deadline - time.monotonic()) * 1000), 1)
        return int(self._client.position(tp, timeout_ms=left_ms))

    def _all_exist(self, topics: frozenset[str]) -> bool:
        return all(self._client.partitions_for_topic(t) for t in topics)

    # -- shutdown -------------------------------------------------------------------
    def _fail_open_requests(self, error: TransportError) -> None:
        for request in self._awaiting:
            request.finish(error)
        self._awaiting = []
        while True:
            try:
                self._requests.get_nowait().finish(error)
            except queue.Empty:
                return

    def _close_client(self, timeout: float) -> None:
        kc, self._kc = self._kc, None
        if kc is None:
            return
        try:
            kc.close(autocommit=self.endpoint.group_id is not None,
                     timeout_ms=max(int(timeout * 1000), 1))
        except Exception as exc:  # closing must not raise
            log.warning("kafka: closing the consumer failed: %s", describe(exc))


def _few(names: frozenset[str] | set[str]) -> str:
    ordered = sorted(names)
    return ", ".join(ordered[:3]) + (f" and {len(ordered) - 3} more" if len(ordered) > 3 else "")
