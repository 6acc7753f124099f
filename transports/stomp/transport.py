"""STOMP transport (stomp.py): ActiveMQ Classic, RabbitMQ's STOMP plugin, any STOMP 1.2 broker.

* Destination ``/topic/<topic>``, ``persistent:true``, a receipt on every
  SEND; :meth:`StompTransport.publish` sends the whole batch, then returns
  only when every RECEIPT arrived (an ERROR frame or a lost connection
  raises :class:`PublishError`, the deadline :class:`PublishTimeout`). An
  ERROR frame answering one SEND's receipt with a refusal no retry can cure
  (``PERMANENT_REFUSAL``: not authorized, invalid destination, too large)
  settles that message only: the rest of the batch is still awaited, then
  :class:`MessageRejected` names the refused event(s).
* No ``content-length`` header: ActiveMQ then makes a JMS ``TextMessage``,
  which HCatalog/Oozie consumers cast to. Envelope headers travel as STOMP
  headers, which ActiveMQ maps to JMS string properties.
* One connection per transport (per process, normally) for every topic and
  consumer, heart-beats on, reconnect with capped backoff; consumers are
  re-subscribed with receipts and then told via ``on_reconnect``.
  ``heartbeat_ms=0`` turns heart-beats off: a half-open connection is then
  noticed only when a publish misses its deadline, and a blocked socket
  write has no deadline at all - keep them on.
* At most 1000 frames await their receipt at a time (the rest of a batch
  waits), so a broker busy creating destinations still reads heart-beats.

URL: ``stomp://host:61613[,host2:61613][/vhost][?ca_certs=/path.pem]``; the
``stomp+ssl://`` scheme uses TLS (default port 61614). Credentials come from
settings (``PN_BROKER_USERNAME``/``PN_BROKER_PASSWORD``) or the URL's
userinfo; they are never logged.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Sequence
from typing import ClassVar
from urllib.parse import parse_qs, unquote, urlsplit

from partition_notify.transports.base import Consumer, OnMessage, RawMessage, Transport
from partition_notify.transports.hosts import parse_hosts
from partition_notify.transports.stomp._link import StompLink
from partition_notify.transports.stomp._wire import Endpoint, Sub

from partition_notify.contract import Envelope
from partition_notify.core.errors import ConfigurationError, PublishError, SubscribeError
from partition_notify.core.limits import CONNECT_TIMEOUT_SECONDS

DEFAULT_PORTS = {"stomp": 61613, "stomp+ssl": 61614}


def parse_url(url: str, *, username: str | None = None, password: str | None = None,
              connect_timeout: float = CONNECT_TIMEOUT_SECONDS, heartbeat_ms: int = 5000,
              client_id: str = "partition-notify") -> Endpoint:
    """An :class:`Endpoint` from a ``stomp://`` URL; explicit credentials win over the URL's."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise ConfigurationError(f"STOMP URL must start with stomp:// or stomp+ssl://, "
                                 f"got scheme {scheme!r}")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    url_user, _, url_password = userinfo.partition(":")
    hosts = parse_hosts(hostlist, default_port=DEFAULT_PORTS[scheme], kind="STOMP",
                        example=f"{scheme}://host:{DEFAULT_PORTS[scheme]}")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = set(query) - {"ca_certs"}
    if unknown:
        raise ConfigurationError(f"STOMP URL: unknown parameter(s) {sorted(unknown)}; "
                                 "known: ca_certs")
    heartbeat_ms = int(heartbeat_ms)
    timeout = float(connect_timeout)
    if heartbeat_ms < 0 or timeout <= 0:
        raise ConfigurationError(f"STOMP: heartbeat_ms must be >= 0 (got {heartbeat_ms}) and "
                                 f"connect_timeout > 0 (got {timeout})")
    return Endpoint(
        hosts=hosts,
        username=username or unquote(url_user) or None,
        password=password or unquote(url_password) or None,
        vhost=unquote(parts.path.lstrip("/")) or "/",
        use_ssl=scheme == "stomp+ssl",
        ca_certs=query.get("ca_certs"),
        connect_timeout=timeout,
        heartbeat_ms=heartbeat_ms,
        label=client_id or "partition-notify",
    )


class StompTransport(Transport):
    scheme: ClassVar[str] = "stomp"

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.link = StompLink(endpoint)
        self._consumer_ids = itertools.count(1)

    @classmethod
    def from_url(cls, url: str, *, username: str | None = None, password: str | None = None,
                 connect_timeout: float = CONNECT_TIMEOUT_SECONDS, heartbeat_ms: int = 5000,
                 client_id: str = "partition-notify", **_: object) -> StompTransport:
        return cls(parse_url(url, username=username, password=password,
                             connect_timeout=connect_timeout, heartbeat_ms=heartbeat_ms,
                             client_id=client_id))

    def publish(self, envelopes: Sequence[Envelope], *, timeout: float) -> None:
        if not envelopes:
            return
        for env in envelopes:
            # Without content-length a NUL would end the frame early.
            if b"\x00" in env.body:
                raise PublishError(f"event {env.event_id}: body contains a NUL byte, which "
                                   "STOMP cannot carry without content-length")
        self.link.publish(envelopes, time.monotonic() + timeout, timeout)

    def consumer(self, on_message: OnMessage) -> StompConsumer:
        return StompConsumer(self.link, on_message, f"pn{next(self._consumer_ids)}")

    def close(self, timeout: float) -> None:
        self.link.close(timeout)


class StompConsumer(Consumer):
    """Follows any number of topics over the transport's one connection."""

    def __init__(self, link: StompLink, on_message: OnMessage, prefix: str) -> None:
        self._link = link
        self._on_message = on_message
        self._prefix = prefix
        self._ids = itertools.count(1)
        self._subs: dict[str, Sub] = {}  # topic -> subscription
        self._lock = threading.Lock()  # one subscribe at a time: no topic subscribed twice
        self._closed = False

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._subs)

    def subscribe(self, topics: Sequence[str], *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        if not self._lock.acquire(timeout=timeout):
            raise SubscribeError("timed out waiting for another subscribe on this consumer")
        try:
            if self._closed:
                raise SubscribeError("this consumer is closed")
            new = [Sub(f"{self._prefix}-{next(self._ids)}", t, self)
                   for t in dict.fromkeys(topics) if t not in self._subs]
            if new:
                self._link.subscribe(new, deadline, timeout)
                self._subs.update((s.topic, s) for s in new)
        finally:
            self._lock.release()

    # -- called by the link ---------------------------------------------------
    def deliver(self, raw: RawMessage) -> None:
        self._on_message(raw)

    def reconnected(self) -> None:
        if self.on_reconnect is not None:
            self.on_reconnect()

    def close(self, timeout: float) -> None:
        with self._lock:
            self._closed = True
            subs, self._subs = list(self._subs.values()), {}
        self._link.unsubscribe(subs, time.monotonic() + timeout)
