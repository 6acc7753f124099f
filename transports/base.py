"""The transport interface: publish durably, and consume with a confirmed subscription.

Adding a transport (the whole recipe, with the layer rules, is in
docs/architecture.md): subclass :class:`Transport` (and :class:`Consumer`) in
its own subpackage like ``transports/stomp/``, implement ``from_url`` (mypy
refuses a subclass without it, and checks its keywords against
:class:`TransportOptions`), parse the URL's host list with
``partition_notify.transports.hosts.parse_hosts`` and retry with ``partition_notify.core.backoff``,
map driver errors to the ``partition_notify.core.errors`` tree at this boundary,
add the scheme to ``TRANSPORTS`` in ``transports/registry.py`` (imported only
when used), and add the broker to the contract suite in ``tests/contract``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, TypedDict, Unpack

from partition_notify.contract import Envelope

if TYPE_CHECKING:
    from partition_notify.store import Store


@dataclass(frozen=True, slots=True)
class RawMessage:
    """A message as it came off the bus, before decoding."""

    topic: str
    headers: dict[str, str]
    body: bytes


OnMessage = Callable[[RawMessage], None]


class TransportOptions(TypedDict, total=False):
    """What the composition root passes to every transport's ``from_url``.

    Each transport takes the keywords it needs and accepts the rest with ``**_``.
    """

    store: Store
    poll_interval_seconds: float
    cross_process_wakeups: bool
    username: str | None
    password: str | None
    connect_timeout: float
    heartbeat_ms: int
    client_id: str


class Consumer(abc.ABC):
    """One connection that follows any number of topics.

    ``on_message`` is called from the consumer's own thread, one message at a
    time; it must not block for long.
    """

    #: Called after the consumer reconnected and resubscribed, so the owner
    #: can re-read history for anything sent while it was away.
    on_reconnect: Callable[[], None] | None = None

    @abc.abstractmethod
    def subscribe(self, topics: Sequence[str], *, timeout: float) -> None:
        """Follow ``topics``; return once the broker confirmed the subscription."""

    @abc.abstractmethod
    def close(self, timeout: float) -> None:
        """Stop delivering and release the connection."""


class Transport(abc.ABC):
    """A message bus.

    Failures are mapped at this boundary: a message the broker refuses for
    good (too large, not authorized, invalid destination) raises
    :class:`~partition_notify.core.errors.MessageRejected` naming its event id,
    after the rest of the call was confirmed or failed; every other failure
    (broker down, timeout, connection lost) is a retriable ``PublishError``.
    Each transport declares which driver errors are permanent.
    """

    scheme: ClassVar[str]
    #: True when the store's event log *is* the bus (nothing to send).
    uses_store_log: ClassVar[bool] = False

    @classmethod
    @abc.abstractmethod
    def from_url(cls, url: str, **options: Unpack[TransportOptions]) -> Transport:
        """Build the transport for ``url``.

        ``options`` are the keyword arguments the composition root passes to
        every transport (store, credentials, timeouts, client id); each
        transport takes the ones it needs and ignores the rest.
        """

    @abc.abstractmethod
    def publish(self, envelopes: Sequence[Envelope], *, timeout: float) -> None:
        """Return only when the bus holds every envelope durably; raise PublishError otherwise.

        Envelopes refused for good raise MessageRejected (``rejected`` by event
        id, ``confirmed`` the others the broker took) once every other envelope
        of the call was confirmed, failed or timed out.
        """

    @abc.abstractmethod
    def consumer(self, on_message: OnMessage) -> Consumer:
        """A new consumer that hands every message to ``on_message``."""

    def close(self, timeout: float) -> None:  # noqa: B027 - optional hook
        """Release connections, waiting at most ``timeout`` seconds."""
