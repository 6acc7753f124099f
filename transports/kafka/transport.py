"""Kafka transport (kafka-python): Apache Kafka and Kafka-protocol brokers.

* Publishing: ``acks='all'``, record key ``db.table`` (one partition per
  table, so per-table order holds on multi-partition topics too), envelope
  headers as record headers (UTF-8 bytes). :meth:`KafkaTransport.publish`
  sends the whole batch, then waits on *every* record's future with one
  deadline - ``flush()`` would return even when records failed.
* Missing topics are created with the admin client (``create_topics``,
  ``partitions``, ``replication_factor`` options); see ``_topics``.
* Consuming: see ``consumer`` - no consumer group by default; every
  partition of the followed topics is assigned and pinned at its end offset
  before ``subscribe`` returns. ``?group_id=`` switches to a consumer group.
* Clients are created lazily: a subscriber-only process never opens a
  producer connection.

URL and options: see ``config``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import kafka.errors as kerrors
from kafka import KafkaProducer
from partition_notify.transports.base import OnMessage, Transport
from partition_notify.transports.kafka._sasl import check_sasl
from partition_notify.transports.kafka._topics import TopicAdmin, client_config, describe
from partition_notify.transports.kafka.config import KafkaEndpoint, parse_url
from partition_notify.transports.kafka.consumer import KafkaTopicConsumer

from partition_notify.contract import Envelope
from partition_notify.core.errors import (
    ConnectError,
    MessageRejected,
    PublishError,
    PublishTimeout,
)
from partition_notify.core.limits import CONNECT_TIMEOUT_SECONDS

if TYPE_CHECKING:
    from kafka.producer.future import FutureRecordMetadata

log = logging.getLogger(__name__)


class KafkaTransport(Transport):
    scheme: ClassVar[str] = "kafka"
    #: Refusals of one record that no retry can cure: too large for the producer's
    #: max_request_size or the broker's message.max.bytes, not authorized, bad topic.
    permanent: ClassVar[tuple[type[BaseException], ...]] = (
        kerrors.MessageSizeTooLargeError,
        kerrors.RecordListTooLargeError,
        kerrors.InvalidRecordError,
        kerrors.TopicAuthorizationFailedError,
        kerrors.InvalidTopicError,
    )

    def __init__(self, endpoint: KafkaEndpoint) -> None:
        self.endpoint = endpoint
        self.topics = TopicAdmin(endpoint)
        self._producer: KafkaProducer | None = None
        self._lock = threading.Lock()
        self._consumers: list[KafkaTopicConsumer] = []
        self._closed = False

    @classmethod
    def from_url(cls, url: str, *, username: str | None = None, password: str | None = None,
                 connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
                 client_id: str = "partition-notify", **_: object) -> KafkaTransport:
        return cls(parse_url(url, username=username, password=password,
                             connect_timeout=connect_timeout, client_id=client_id))

    # -- publishing -------------------------------------------------------------
    def publish(self, envelopes: Sequence[Envelope], *, timeout: float) -> None:
        if not envelopes:
            return
        deadline = time.monotonic() + timeout
        producer = self._get_producer(deadline)
        topics = {env.topic for env in envelopes}
        if not self.topics.known(topics):
            self.topics.ensure(topics, deadline)
        futures: list[tuple[Envelope, FutureRecordMetadata]] = []
        #: Records refused for good, by event id; the rest of the batch still goes,
        #: except later records of a refused record's topic (per-topic order).
        rejected: dict[int, str] = {}
        refused_topics: set[str] = set()
        env = envelopes[0]
        try:
            for env in envelopes:
                if env.topic in refused_topics:
                    continue  # left unconfirmed: the relay sends it after the refused one
                if time.monotonic() >= deadline:
                    raise PublishTimeout(f"kafka: {len(envelopes) - len(futures)} of "
                                         f"{len(envelopes)} records not even sent within "
                                         f"{timeout:g} s")
                try:
                    futures.append((env, producer.send(
                        env.topic, value=env.body, key=env.key.encode(),
                        headers=[(k, v.encode()) for k, v in env.headers.items()])))
                except self.permanent as exc:  # checked by send() itself: size
                    rejected[env.event_id] = describe(exc)
                    refused_topics.add(env.topic)
        except kerrors.KafkaTimeoutError as exc:
            # send() blocks for metadata: the topic is missing and cannot be auto-created,
            # or the broker is unreachable.
            raise PublishTimeout(f"kafka: no metadata for topic {env.topic} "
                                 f"within the deadline ({describe(exc)}); does the topic exist?"
                                 ) from exc
        except (kerrors.KafkaError, ValueError, TypeError) as exc:
            self._replace_producer(producer)
            raise PublishError(f"kafka: sending to {env.topic} failed: "
                               f"{describe(exc)}") from exc
        self._wait_all(producer, futures, deadline, timeout, rejected)
        self.topics.mark_known(topics)

    def _wait_all(self, producer: KafkaProducer,
                  futures: list[tuple[Envelope, FutureRecordMetadata]], deadline: float,
                  timeout: float, rejected: dict[int, str]) -> None:
        failed: list[tuple[Envelope, BaseException]] = []
        confirmed: set[int] = set()
        unresolved = 0
        #: id of a refusal -> the topic it was first seen on. A refusal makes the
        #: idempotent producer fatal, and it aborts every other batch in flight with that
        #: same exception: those records were not judged by the broker (retriable).
        refused_on: dict[int, str] = {}
        for env, future in futures:
            try:
                future.get(timeout=max(deadline - time.monotonic(), 0.0))
                confirmed.add(env.event_id)
            except kerrors.KafkaTimeoutError as exc:
                if future.is_done:
                    failed.append((env, exc))
                else:
                    unresolved += 1
            except self.permanent as exc:
                if refused_on.setdefault(id(exc), env.topic) == env.topic:
                    rejected[env.event_id] = describe(exc)
                failed.append((env, exc))
            except kerrors.KafkaError as exc:
                failed.append((env, exc))
        if failed:
            # kafka-python 3's idempotent producer turns any non-retriable batch error
            # into a fatal state that fails every later send: start afresh.
            self._replace_producer(producer)
        if rejected:
            head = min(rejected)
            raise MessageRejected(
                f"kafka: refused for good: event {head}: {rejected[head]}"
                + (f" ({len(rejected) - 1} more)" if len(rejected) > 1 else ""),
                rejected, frozenset(confirmed))
        if not failed and not unresolved:
            return
        if failed:
            first, cause = failed[0]
            how = "broker refused" if isinstance(cause, kerrors.BrokerResponseError) else "failed"
            more = f" ({len(failed) - 1} more failed, {unresolved} unconfirmed)" \
                if len(failed) > 1 or unresolved else ""
            raise PublishError(f"kafka: {how} event {first.event_id} on topic {first.topic}: "
                               f"{describe(cause)}{more}") from cause
        raise PublishTimeout(f"kafka: {unresolved} of {len(futures)} records not acknowledged "
                             f"(acks=all) within {timeout:g} s")

    def _get_producer(self, deadline: float) -> KafkaProducer:
        with self._lock:
            if self._closed:
                raise PublishError("kafka transport is closed")
            if self._producer is not None:
                return self._producer
            left = deadline - time.monotonic()
            if left <= 0:
                raise PublishTimeout("kafka: no time left to connect a producer")
            check_sasl(self.endpoint, deadline)
            try:
                self._producer = KafkaProducer(**self._producer_config(left))
            except kerrors.KafkaError as exc:
                raise ConnectError(f"kafka: cannot connect a producer to "
                                   f"{','.join(self.endpoint.bootstrap)}: {describe(exc)}"
                                   ) from exc
            return self._producer

    def _producer_config(self, timeout: float) -> dict[str, object]:
        config = client_config(self.endpoint, min(timeout, self.endpoint.connect_timeout))
        # Idempotence keeps per-partition order across retries with several requests
        # in flight; max_block_ms bounds send()'s wait for a new topic's metadata.
        config.update(acks="all", enable_idempotence=True, linger_ms=0,
                      max_block_ms=int(self.endpoint.connect_timeout * 1000))
        return config

    def _replace_producer(self, broken: KafkaProducer) -> None:
        with self._lock:
            if self._producer is not broken:
                return
            self._producer = None
        _close_quietly(broken, 1.0)

    # -- consuming ----------------------------------------------------------------
    def consumer(self, on_message: OnMessage) -> KafkaTopicConsumer:
        consumer = KafkaTopicConsumer(self.endpoint, self.topics, on_message)
        with self._lock:
            self._consumers.append(consumer)
        return consumer

    def close(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._lock:
            self._closed = True
            producer, self._producer = self._producer, None
            consumers, self._consumers = self._consumers, []
        for consumer in consumers:
            consumer.close(max(deadline - time.monotonic(), 0.0))
        if producer is not None:
            _close_quietly(producer, max(deadline - time.monotonic(), 0.0))


def _close_quietly(client: KafkaProducer, timeout: float) -> None:
    try:
        client.close(timeout=timeout)
    except Exception as exc:  # closing must not mask the caller's error
        log.warning("kafka: closing the producer failed: %s", describe(exc))
