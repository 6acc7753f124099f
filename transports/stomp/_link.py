"""One STOMP connection per transport, shared by the publisher and every consumer.

stomp.py gives a socket, an I/O thread and a heart-beat thread per
connection; this module adds what it lacks: deadlines on CONNECT and on
receipts, failing pending receipts when an ERROR frame arrives or the
connection drops, and reconnecting with capped backoff. After a reconnect
every subscription is re-made *with receipts* before the owners are told
(``Owner.reconnected``), so they can re-read history knowing the live feed
is already flowing.

Thread count: stomp.py's I/O and heart-beat threads, plus a short-lived
reconnect thread only while the broker is away.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import stomp
import stomp.exception
from partition_notify.transports.base import RawMessage
from partition_notify.transports.stomp._pending import (
    Batch,
    ReceiptBook,
    ReceiptFailed,
    ReceiptTimeout,
)
from partition_notify.transports.stomp._wire import (
    DRIVER_ERRORS,
    PERMANENT_REFUSAL,
    SEND_WINDOW,
    SUBSCRIBE_SECONDS_EACH,
    WINDOW,
    Endpoint,
    Frame,
    Listener,
    Owner,
    ReceivedFrame,
    SendBuffer,
    Sub,
    close_socket,
    hide_passcodes,
    notify_reconnected,
)

from partition_notify.core.backoff import Backoff
from partition_notify.core.errors import (
    ConnectError,
    MessageRejected,
    PartitionNotifyError,
    PublishError,
    PublishTimeout,
    SubscribeError,
)

log = logging.getLogger("partition_notify.transports.stomp")
#: The first reconnect attempt after a loss waits this long (then doubles).
RECONNECT_FIRST_DELAY = 0.1
_Item = TypeVar("_Item")

#: Failures a best-effort step (UNSUBSCRIBE, DISCONNECT) only logs.
_BEST_EFFORT: tuple[type[BaseException], ...] = (*DRIVER_ERRORS, ReceiptFailed, ReceiptTimeout)
class StompLink:
    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.receipts = ReceiptBook(f"pn-{id(self):x}")
        self.connects = 0
        self._lock = threading.RLock()  # guards _conn/_gen/_subs
        self._connect_lock = threading.Lock()  # one connection attempt at a time
        self._conn: stomp.Connection12 | None = None
        self._gen = 0
        self._subs: dict[str, Sub] = {}
        self._closed = threading.Event()
        self._reconnector: threading.Thread | None = None

    # -- connection -----------------------------------------------------------
    def connection(self, deadline: float) -> tuple[stomp.Connection12, int]:
        """The live connection (opening one if needed) and its generation."""
        with self._lock:
            if self._conn is not None:
                return self._conn, self._gen
        if not self._connect_lock.acquire(timeout=max(deadline - time.monotonic(), 0)):
            raise ConnectError(f"timed out waiting for the connection to {self.endpoint.where}")
        owners: list[Owner] = []
        try:
            conn, gen, owners = self._ensure_locked(deadline)
        finally:
            self._connect_lock.release()
        notify_reconnected(owners)
        return conn, gen

    def _ensure_locked(self, deadline: float) -> tuple[stomp.Connection12, int, list[Owner]]:
        if self._closed.is_set():
            raise ConnectError(f"the connection to {self.endpoint.where} is closed")
        with self._lock:
            if self._conn is not None:
                return self._conn, self._gen, []
        conn, gen = self._open(deadline)
        with self._lock:
            subs = list(self._subs.values())
        if subs:
            try:
                self._subscribe_frames(conn, gen, subs, deadline + SUBSCRIBE_SECONDS_EACH *
                                       len(subs))
            except PartitionNotifyError:
                self._drop(conn, gen, timeout=1.0)
                raise
            log.info("re-subscribed %d topic(s) on %s", len(subs), self.endpoint.where)
        owners = list({id(s.owner): s.owner for s in subs}.values())
        return conn, gen, owners

    def _open(self, deadline: float) -> tuple[stomp.Connection12, int]:
        ep = self.endpoint
        left = deadline - time.monotonic()
        if left <= 0:
            raise ConnectError(f"no time left to connect to {ep.where}")
        hide_passcodes()
        with self._lock:
            self._gen += 1
            gen = self._gen
        conn = stomp.Connection12(
            list(ep.hosts), reconnect_attempts_max=1, timeout=min(left, ep.connect_timeout),
            heartbeats=(ep.heartbeat_ms, ep.heartbeat_ms), vhost=ep.vhost,
            auto_decode=False, auto_content_length=False, heart_beat_receive_scale=2.0)
        if ep.use_ssl:
            conn.set_ssl(for_hosts=list(ep.hosts), ca_certs=ep.ca_certs)
        listener = Listener(self, gen)
        conn.set_listener("partition-notify", listener)
        try:
            conn.connect(ep.username, ep.password, wait=False)
        except DRIVER_ERRORS as exc:
            self._drop(conn, gen, timeout=1.0)
            detail = str(exc) or "no TCP connection could be made"
            raise ConnectError(f"cannot connect to {ep.where}: {type(exc).__name__}: {detail}"
                               ) from exc
        if not listener.answered.wait(max(deadline - time.monotonic(), 0)):
            self._drop(conn, gen, timeout=1.0)
            raise ConnectError(f"no CONNECTED frame from {ep.where} within "
                               f"{ep.connect_timeout:g} s")
        if not listener.connected:
            self._drop(conn, gen, timeout=1.0)
            raise ConnectError(f"{ep.where} refused the connection: {listener.refusal}")
        with self._lock:
            if self._gen != gen:  # closed meanwhile
                close_socket(conn)
                raise ConnectError(f"the connection to {ep.where} was closed while opening")
            # Published before re-subscribing finishes: a loss now fails those receipts too.
            self._conn = conn
        self.connects += 1
        log.info("connected to %s as %s (connection #%d)", ep.where,
                 ep.username or "anonymous", self.connects)
        return conn, gen

    def lost(self, gen: int, reason: str) -> None:
        with self._lock:
            if gen != self._gen or self._conn is None:
                return
            conn, self._conn = self._conn, None
            failed = self.receipts.fail_all(f"{reason} before the broker confirmed")
            want_reconnect = bool(self._subs) and not self._closed.is_set()
            if want_reconnect:
                self._start_reconnector()
        log.warning("lost the connection to %s (%s); %d pending batch(es) failed%s",
                    self.endpoint.where, reason, failed,
                    ", reconnecting" if want_reconnect else "")
        close_socket(conn)

    def _reconnect_loop(self) -> None:
        # 0.1 s first, doubling up to reconnect_max_delay, 0-20 % jitter.
        backoff = Backoff(initial=RECONNECT_FIRST_DELAY, jitter=0.2,
                          cap=max(self.endpoint.reconnect_max_delay, RECONNECT_FIRST_DELAY))
        try:
            while not self._closed.is_set():
                try:
                    self.connection(time.monotonic() + self.endpoint.connect_timeout)
                    return
                except PartitionNotifyError as exc:
                    delay = backoff.failed()
                    log.warning("reconnect to %s failed, next try in %.1f s: %s",
                                self.endpoint.where, delay, exc)
                backoff.wait(self._closed, delay)
        finally:
            with self._lock:
                self._reconnector = None
                # A loss while we were finishing found this thread still registered.
                if self._conn is None and self._subs and not self._closed.is_set():
                    self._start_reconnector()

    def _start_reconnector(self) -> None:
        with self._lock:
            if self._reconnector is None:
                self._reconnector = threading.Thread(target=self._reconnect_loop,
                                                     name="pn-stomp-reconnect", daemon=True)
                self._reconnector.start()

    def on_receipt(self, receipt_id: str) -> None:
        self.receipts.resolve(receipt_id)

    def on_error(self, gen: int, receipt_id: str | None, reason: str) -> None:
        permanent = PERMANENT_REFUSAL.search(reason) is not None
        if receipt_id and self.receipts.fail(receipt_id, f"the broker refused it: {reason}",
                                             permanent=permanent):  # in the caller's error
            log.debug("broker %s refused a frame: %s", self.endpoint.where, reason)
            return
        # STOMP: the server closes the connection after an ERROR frame.
        self.lost(gen, f"ERROR frame from the broker: {reason}")

    def on_message(self, frame: ReceivedFrame) -> None:
        headers: dict[str, str] = {str(k): str(v) for k, v in frame.headers.items()}
        sub = self._subs.get(headers.get("subscription", ""))
        if sub is None:
            return  # unsubscribed meanwhile
        body = frame.body if isinstance(frame.body, bytes) else (frame.body or "").encode()
        try:
            sub.owner.deliver(RawMessage(sub.topic, headers, body))
        except Exception:
            log.exception("message handler failed on topic %s", sub.topic)

    # -- frames with receipts -------------------------------------------------
    def publish(self, frames: Sequence[Frame], deadline: float, timeout: float) -> None:
        conn, gen = self.connection(deadline)

        buffer = SendBuffer(conn)  # SENDs written in batches (_wire.py)
        by_rid = buffer.event_ids

        def settle(batch: Batch) -> None:
            # Refusals for good are the messages' own fault: name them, and say
            # which of the others the broker confirmed, whatever else happened.
            if batch.refused:
                rejected = {by_rid[r]: why for r, why in batch.refused.items()}
                confirmed = frozenset(by_rid[r] for r in batch.ids
                                      if r not in batch.remaining and r not in batch.refused)
                first = min(rejected)
                raise MessageRejected(
                    f"{self.endpoint.where}: event {first}: {rejected[first]}"
                    + (f" ({len(rejected) - 1} more)" if len(rejected) > 1 else ""),
                    rejected, confirmed)

        self._pipeline(conn, gen, frames, buffer.send, deadline, timeout, "message(s)",
                       PublishError, PublishTimeout, window=SEND_WINDOW, settle=settle,
                       flush=buffer.flush)

    def subscribe(self, subs: Sequence[Sub], deadline: float, timeout: float) -> None:
        """Register and SUBSCRIBE ``subs``; return once every RECEIPT arrived."""
        if not self._connect_lock.acquire(timeout=max(deadline - time.monotonic(), 0)):
            raise SubscribeError(f"timed out waiting for the connection to "
                                 f"{self.endpoint.where}")
        owners: list[Owner] = []
        try:
            conn, gen, owners = self._ensure_locked(deadline)
            with self._lock:
                self._subs.update((s.sub_id, s) for s in subs)
            try:
                self._subscribe_frames(conn, gen, subs, deadline, timeout)
            except BaseException:
                self.unsubscribe(subs, time.monotonic() + 1.0)
                raise
        finally:
            self._connect_lock.release()
        notify_reconnected(owners)

    def _subscribe_frames(self, conn: stomp.Connection12, gen: int, subs: Sequence[Sub],
                          deadline: float, timeout: float | None = None) -> None:
        def send(s: Sub, rid: str) -> None:
            conn.subscribe(s.destination, id=s.sub_id, ack="auto", headers={"receipt": rid})

        self._pipeline(conn, gen, subs, send, deadline,
                       timeout if timeout is not None else deadline - time.monotonic(),
                       "subscription(s)", SubscribeError, SubscribeError)

    def _pipeline(self, conn: stomp.Connection12, gen: int, items: Sequence[_Item],
                  send: Callable[[_Item, str], None], deadline: float, timeout: float, what: str,
                  failed: type[PartitionNotifyError],
                  timed_out: type[PartitionNotifyError], window: int = WINDOW,
                  settle: Callable[[Batch], None] | None = None,
                  flush: Callable[[], None] = lambda: None) -> None:
        """Send every item with a receipt, at most ``window`` unconfirmed; wait for all.

        ``settle`` sees the batch once it is over (whether it succeeded or not)
        and may raise a more specific error. ``flush`` writes what ``send`` buffered;
        it runs before every wait for receipts.
        """
        ids = self.receipts.new_ids(len(items))
        batch = self._expect(conn, ids, failed)
        try:
            self._send_all(conn, gen, items, ids, batch, (send, flush), deadline, timeout,
                           what, failed, timed_out, window)
        except PartitionNotifyError as exc:
            if settle is not None:
                settle(batch)
            raise exc
        finally:
            self.receipts.forget(batch)
        if settle is not None:
            settle(batch)

    def _send_all(self, conn: stomp.Connection12, gen: int, items: Sequence[_Item],
                  ids: list[str], batch: Batch,
                  io: tuple[Callable[[_Item, str], None], Callable[[], None]], deadline: float,
                  timeout: float, what: str, failed: type[PartitionNotifyError],
                  timed_out: type[PartitionNotifyError], window: int) -> None:
        half = window // 2
        send, flush = io
        try:
            try:
                for k, (item, rid) in enumerate(zip(items, ids, strict=True)):
                    if k >= window and k % half == 0:
                        flush()
                        self.receipts.wait_below(batch, len(items) - k + half, deadline)
                    send(item, rid)
                flush()
            except DRIVER_ERRORS as exc:
                self.lost(gen, f"sending failed: {type(exc).__name__} {exc}")
                raise failed(f"sending {len(items)} {what} to {self.endpoint.where} failed: "
                             f"{type(exc).__name__} {exc}") from exc
            self.receipts.wait_below(batch, 0, deadline)
        except ReceiptFailed as exc:
            raise failed(f"{len(items)} {what} on {self.endpoint.where} not confirmed: "
                         f"{exc}") from exc
        except ReceiptTimeout as exc:
            raise timed_out(f"no RECEIPT from {self.endpoint.where} for {exc.missing} of "
                            f"{exc.total} {what} within {timeout:g} s") from exc

    def unsubscribe(self, subs: Sequence[Sub], deadline: float) -> None:
        """Best effort: stop the broker sending; one receipt confirms them all (in order)."""
        self._forget_subs(subs)
        with self._lock:
            conn = self._conn
        if conn is None or not subs:
            return
        rid = self.receipts.new_ids(1)[0]
        batch = self.receipts.expect([rid])
        try:
            for i, s in enumerate(subs):
                conn.unsubscribe(s.sub_id, headers={"receipt": rid} if i == len(subs) - 1
                                 else {})
            self.receipts.wait(batch, deadline)
        except _BEST_EFFORT as exc:
            self.receipts.forget(batch)
            log.info("unsubscribing %d topic(s) on %s was not confirmed: %s", len(subs),
                     self.endpoint.where, exc)

    def _forget_subs(self, subs: Sequence[Sub]) -> None:
        with self._lock:
            for s in subs:
                self._subs.pop(s.sub_id, None)

    def _expect(self, conn: stomp.Connection12, ids: list[str],
                error: type[PartitionNotifyError]) -> Batch:
        # Registered under the lock so a concurrent loss either fails this batch
        # or is seen here: no batch can wait on a dead connection unnoticed.
        with self._lock:
            if self._conn is not conn:
                raise error(f"the connection to {self.endpoint.where} was lost")
            return self.receipts.expect(ids)

    # -- shutdown -------------------------------------------------------------
    def close(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        self._closed.set()
        with self._lock:
            conn, gen = self._conn, self._gen
            self._conn = None
            self._gen += 1  # our own disconnect is not a loss
            self._subs.clear()
            reconnector = self._reconnector
        self.receipts.fail_all("the transport was closed")
        if conn is not None:
            rid = self.receipts.new_ids(1)[0]
            batch = self.receipts.expect([rid])
            try:
                conn.send_frame("DISCONNECT", {"receipt": rid})
                self.receipts.wait(batch, min(deadline, time.monotonic() + 2.0))
            except _BEST_EFFORT as exc:
                log.debug("DISCONNECT not confirmed by %s: %s", self.endpoint.where, exc)
            else:
                # The broker closes after the receipt; closing too would race stomp.py's
                # reader over the same socket.
                io_thread = getattr(conn.transport, "io_thread", None)
                if io_thread is not None:
                    io_thread.join(min(0.5, max(deadline - time.monotonic(), 0)))
            self._drop(conn, gen, timeout=max(deadline - time.monotonic(), 0.1))
        if reconnector is not None:
            reconnector.join(max(deadline - time.monotonic(), 0))

    def _drop(self, conn: stomp.Connection12, gen: int, *, timeout: float) -> None:
        with self._lock:
            if self._gen == gen:
                self._gen += 1  # events of this connection are now stale
            if self._conn is conn:
                self._conn = None
        close_socket(conn)
        io_thread = getattr(conn.transport, "io_thread", None)
        if io_thread is not None and io_thread is not threading.current_thread():
            io_thread.join(timeout)
