"""What travels on a STOMP connection: the endpoint, frames, subscriptions, broker errors.

Also the logging filter that keeps the CONNECT passcode out of stomp.py's
DEBUG frame logs; the link installs it before it first connects.
"""

from __future__ import annotations

import logging
import operator
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import stomp
import stomp.exception
from partition_notify.transports.base import RawMessage

from partition_notify.core.limits import CONNECT_TIMEOUT_SECONDS

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
#: SEND frames written to the socket at once: stomp.py writes each frame with its own
#: ``sendall`` after its per-frame bookkeeping, which was most of a pipelined send's CPU.
SEND_BATCH = 64
#: The characters STOMP 1.2 escapes in header values.
_NEEDS_ESCAPE = re.compile(r"[\\\n:\r]")


def send_frame(destination: str, body: bytes, headers: Mapping[str, str]) -> bytes:
    """A SEND frame's bytes exactly as stomp.py 1.2 writes them (``Protocol12.send``:
    header values escaped, headers sorted, no content-length, NUL-terminated);
    tests/transports/test_stomp_wire.py compares the two."""
    return _send_frame({**headers, "destination": destination}, body)


def _send_frame(merged: Mapping[str, str], body: bytes) -> bytes:
    """:func:`send_frame` of headers that hold the destination already."""
    head = _HEADS.get(names := tuple(merged))
    if head is None:
        head = _head(names)
    values = head[0](merged)
    if _NEEDS_ESCAPE.search("".join(values)) is not None:  # rare: escape each
        values = tuple(v.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\c")
                       .replace("\r", "\\r") for v in values)
    return b"".join(((head[1] % values).encode(), body, b"\x00"))


#: Per set of header names (in the order given): their values in sorted-name order, and
#: the frame's head as a %-format of them. Every SEND of one kind of message has the same
#: names, and sorting and formatting them per frame was most of its encoding.
_HEADS: dict[tuple[str, ...], tuple[Callable[[Mapping[str, str]], tuple[str, ...]], str]] = {}
_MAX_HEADS = 256


def _head(names: tuple[str, ...]) -> tuple[Callable[[Mapping[str, str]], tuple[str, ...]], str]:
    order = sorted(names)
    fmt = "SEND\n" + "".join(k.replace("%", "%%") + ":%s\n" for k in order) + "\n"
    # One name: itemgetter returns the value itself, not a tuple of it.
    pick = operator.itemgetter(*order) if len(order) > 1 else (lambda h: (h[order[0]],))
    if len(_HEADS) >= _MAX_HEADS:
        _HEADS.clear()
    _HEADS[names] = (pick, fmt)
    return pick, fmt


class SendBuffer:
    """One publish's SEND frames, encoded here and written :data:`SEND_BATCH` at a time:
    the bytes stomp.py would write, one frame after another. Per-frame ``sendall``
    and stomp.py's per-frame bookkeeping were most of a pipelined publish's CPU
    (bench/brokers_stomp.py). The link flushes before every wait for receipts."""

    def __init__(self, conn: stomp.Connection12) -> None:
        self._conn = conn
        self._pending: list[bytes] = []
        #: Receipt id -> event id of every frame sent (a refusal names its event).
        self.event_ids: dict[str, int] = {}

    def send(self, frame: Frame, rid: str) -> None:
        self.event_ids[rid] = frame.event_id
        # send_frame's headers in one merge (the same names, order and precedence).
        self._pending.append(_send_frame({**frame.headers, "persistent": "true", "receipt": rid,
                                          "destination": f"/topic/{frame.topic}"}, frame.body))
        if len(self._pending) >= SEND_BATCH:
            self.flush()

    def flush(self) -> None:
        """Write what is buffered as stomp.py's ``transmit`` does: on the socket under its
        lock (a failed write raises as there: ``DRIVER_ERRORS``), or (TLS, non-blocking)
        through its I/O thread's queue."""
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        transport = self._conn.transport
        if transport.blocking:
            transport.send(data)
        else:
            transport.send_queue.put(data)


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
    connect_timeout: float = CONNECT_TIMEOUT_SECONDS
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


class Frame(Protocol):
    """What a SEND carries: an Envelope is one. (The transport used to copy each
    envelope into a frame object of its own: per message a construction and an
    object the garbage collector walks while 10,000 are in flight.)"""

    @property
    def topic(self) -> str: ...
    @property
    def body(self) -> bytes: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def event_id(self) -> int: ...


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

