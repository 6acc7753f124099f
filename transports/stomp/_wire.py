"""What travels on a STOMP connection: the endpoint, frames, subscriptions, broker errors.

Also the logging filter that keeps the CONNECT passcode out of stomp.py's
DEBUG frame logs; the link installs it before it first connects.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import stomp
import stomp.exception
from partition_notify.transports.base import RawMessage

log = logging.getLogger("partition_notify.transports.stomp")

#: Driver errors that mean "the connection is gone"; a retry on a new one may work.
DRIVER_ERRORS: tuple[type[BaseException], ...] = (stomp.exception.StompException, OSError)


class _RedactPasscode(logging.Filter):
    """stomp.py logs raw frames at DEBUG, CONNECT's passcode included (its own
    redaction regex never matches), so secrets are cut out before any handler."""

    # Frames are logged as a list of bytes reprs: b'passcode:secret\n'
    PASSCODE = re.compile(r"(passcode:).*?(?=\\n['\"]|$)", re.MULTILINE)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args and "passcode" in str(record.args):
            record.msg = self.PASSCODE.sub(r"\1********", record.getMessage())
            record.args = ()
        return True


_REDACT_PASSCODE = _RedactPasscode()


def hide_passcodes() -> None:
    """Install the filter before the first CONNECT; ``addFilter`` ignores repeats."""
    logging.getLogger("stomp.py").addFilter(_REDACT_PASSCODE)


#: Unconfirmed SUBSCRIBE frames allowed on the wire: a broker busy creating
#: thousands of destinations must still read our heart-beats (RabbitMQ drops
#: us otherwise).
WINDOW = 1000
#: Unconfirmed SENDs: ActiveMQ batches its journal writes over what is in
#: flight; a 1,000 window gave 0.83x raw stomp.py on 10,000 pipelined sends,
#: 5,000 gave 1.04x (bench/brokers_stomp.py, batch row).
SEND_WINDOW = 5000
#: Extra time per subscription when re-subscribing thousands of topics at once
#: (ActiveMQ needs ~7 ms to create a destination on a busy 2-core machine).
SUBSCRIBE_SECONDS_EACH = 0.01


#: ERROR frames answering one SEND that no retry can cure: ActiveMQ's
#: SecurityException ("User x is not authorized to write to: topic://y") and
#: InvalidDestinationException, RabbitMQ's access_refused, size refusals. Any
#: other refusal (e.g. ActiveMQ's producer flow control) is retried.
PERMANENT_REFUSAL = re.compile(
    r"not authorized|SecurityException|access.refused|InvalidDestination|invalid destination"
    r"|too large|exceeds? (the )?maxim",
    re.IGNORECASE,
)

@dataclass(frozen=True)
class Endpoint:
    hosts: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    vhost: str = "/"
    use_ssl: bool = False
    ca_certs: str | None = None
    connect_timeout: float = 10.0
    heartbeat_ms: int = 5000
    label: str = "partition-notify"
    reconnect_max_delay: float = 5.0

    @property
    def where(self) -> str:
        """Broker address for messages: never carries credentials."""
        scheme = "stomp+ssl" if self.use_ssl else "stomp"
        return f"{scheme}://" + ",".join(f"{h}:{p}" for h, p in self.hosts)


class Owner(Protocol):
    """A consumer: receives MESSAGE frames and hears about reconnects."""

    def deliver(self, raw: RawMessage) -> None: ...

    def reconnected(self) -> None: ...


def notify_reconnected(owners: Sequence[Owner]) -> None:
    """Tell each owner; one failing callback must not keep the others uninformed."""
    for owner in owners:
        try:
            owner.reconnected()
        except Exception:
            log.exception("reconnect callback failed")


@dataclass(frozen=True, slots=True)
class Sub:
    sub_id: str
    topic: str
    owner: Owner

    @property
    def destination(self) -> str:
        return f"/topic/{self.topic}"


@dataclass(frozen=True, slots=True)
class Frame:
    topic: str
    body: bytes
    headers: dict[str, str]
    event_id: int = 0


class ReceivedFrame(Protocol):
    """A frame stomp.py hands its listener (``stomp.utils.Frame``, bodies undecoded)."""

    headers: Mapping[str, str]
    body: bytes | str | None


def describe_error(frame: ReceivedFrame) -> str:
    """The broker's reason from an ERROR frame, short enough for a log line."""
    message = str(frame.headers.get("message", "")).strip()
    body = frame.body or b""
    detail = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    detail = detail.strip().splitlines()[0] if detail.strip() else ""
    text = f"{message}: {detail}" if detail and detail not in message else message or detail
    return (text or "ERROR frame without a message")[:300]


class LinkEvents(Protocol):
    """What a connection's listener reports to the link that owns it."""

    def on_error(self, gen: int, receipt_id: str | None, reason: str) -> None: ...

    def on_receipt(self, receipt_id: str) -> None: ...

    def on_message(self, frame: ReceivedFrame) -> None: ...

    def lost(self, gen: int, reason: str) -> None: ...


class Listener(stomp.ConnectionListener):  # type: ignore[misc]
    """Events of one connection generation; stale generations are ignored by the link."""

    def __init__(self, link: LinkEvents, gen: int) -> None:
        self.link = link
        self.gen = gen
        self.answered = threading.Event()
        self.connected = False
        self.refusal: str | None = None

    def on_connected(self, frame: ReceivedFrame) -> None:
        self.connected = True
        self.answered.set()

    def on_error(self, frame: ReceivedFrame) -> None:
        reason = describe_error(frame)
        if not self.connected:
            self.refusal = reason
            self.answered.set()
            return
        self.link.on_error(self.gen, frame.headers.get("receipt-id"), reason)

    def on_receipt(self, frame: ReceivedFrame) -> None:
        self.link.on_receipt(frame.headers.get("receipt-id", ""))

    def on_message(self, frame: ReceivedFrame) -> None:
        self.link.on_message(frame)

    def on_disconnected(self) -> None:
        if not self.connected:
            self.refusal = self.refusal or "the broker closed the connection"
            self.answered.set()
        self.link.lost(self.gen, "connection closed")

    def on_heartbeat_timeout(self) -> None:
        self.link.lost(self.gen, "no heart-beat from the broker")


def close_socket(conn: stomp.Connection12) -> None:
    if conn.transport.socket is None:
        return  # stomp.py's reader already closed it
    try:
        conn.transport.disconnect_socket()
    except Exception as exc:  # already gone is fine
        log.debug("closing the STOMP socket: %s", exc)

