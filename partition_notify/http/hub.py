"""One reader of the event log per process, fanned out to every HTTP client.

A thousand long-polls and SSE streams cost one query per poll interval, not
a thousand. Clients register with :meth:`EventHub.listen` *before* they read
the store (the late-subscriber protocol): every event after the hub's cursor
at registration reaches the listener, and everything up to that cursor is
already committed, so a read after registering sees it. Together, nothing
is missed; duplicates are dropped by event id (ids are in commit order).

The hub reads the log when woken, not only every poll interval: by this
process's appends (the event log's after-commit listeners) and by other
processes' commits (store/wakeups.py: PostgreSQL LISTEN/NOTIFY, SQLite
inotify). Wakers run on their own threads and only schedule a wake-up on
the event loop (``call_soon_threadsafe``), so the loop never blocks on them.
A wake-up is a hint: the hub still reads every poll interval (at least
:data:`~partition_notify.store.wakeups.FALLBACK_SECONDS` with a waker).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.concurrency import run_in_threadpool

from partition_notify.contract import AnyMessage, decode
from partition_notify.contract.messages import HCAT_EVENT, PN_TABLE
from partition_notify.core.errors import MalformedMessageError, PartitionNotifyError
from partition_notify.store import LoggedEvent, Store
from partition_notify.store.wakeups import (
    FALLBACK_SECONDS,
    Waker,
    cross_process_waker,
    reader_fallback,
)

log = logging.getLogger(__name__)
#: Events read per query; a full page is followed at once by the next.
PAGE = 1000
MAX_BACKOFF_SECONDS = 5.0


@dataclass(slots=True)
class HubEvent:
    event_id: int
    table: str
    event_type: str
    body: str
    _message: AnyMessage | None = field(default=None, repr=False)

    @classmethod
    def of(cls, e: LoggedEvent) -> HubEvent:
        h = e.headers
        return cls(e.event_id, str(h.get(PN_TABLE, "")), str(h.get(HCAT_EVENT, "")), e.body)

    def message(self) -> AnyMessage | None:
        """Decoded once, on first use; None when malformed."""
        if self._message is None:
            try:
                self._message = decode(self.body.encode())
            except MalformedMessageError as exc:
                log.warning("hub: skipping malformed event %d: %s", self.event_id, exc)
                return None
        return self._message


Listener = Callable[[HubEvent | None], None]


class EventHub:
    """Follows the store's event log; calls listeners on the event loop thread.

    A listener gets ``None`` when the hub stops (the server is shutting down).
    """

    def __init__(self, store: Store, poll_interval: float, *, wakeups: bool = True) -> None:
        self.store = store
        self.poll_interval = poll_interval
        self.wakeups = wakeups
        self._waker: Waker | None = None
        self.cursor = 0
        self.ready = asyncio.Event()
        self.stopping = False
        self._listeners: dict[str, set[Listener]] = defaultdict(set)
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def listen(self, table: str, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` with every event of ``table`` after :attr:`cursor`; returns close."""
        self._listeners[table].add(listener)

        def close() -> None:
            group = self._listeners.get(table)
            if group is not None:
                group.discard(listener)
                if not group:
                    del self._listeners[table]

        return close

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    @property
    def listeners(self) -> int:
        return sum(len(g) for g in self._listeners.values())

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.cursor = await run_in_threadpool(self.store.log.max_event_id)
        self.store.log.add_listener(self.poke)
        if self.wakeups:
            # Starting a waker opens no connection on this thread, but loads libc/psycopg.
            self._waker = await run_in_threadpool(cross_process_waker, self.store.engine,
                                                  self.poke)
        self.ready.set()
        self._task = asyncio.create_task(self._run(), name="pn-event-hub")

    @property
    def fallback_interval(self) -> float:
        """How long the hub waits for a wake-up before it reads the log anyway."""
        return reader_fallback(self._waker, self.poll_interval)

    def poke(self) -> None:
        """A write in this process committed: read now rather than at the next tick.

        Thread-safe: write routes run on the thread pool.
        """
        loop = self._loop
        if loop is not None and not loop.is_closed():
            # The loop may close between the check and the call (shutdown): nothing to wake.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._wake.set)

    async def stop(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        self.store.log.remove_listener(self.poke)
        waker, self._waker = self._waker, None
        if waker is not None:
            await run_in_threadpool(waker.close, FALLBACK_SECONDS)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for group in list(self._listeners.values()):
            for listener in list(group):
                listener(None)
        self._listeners.clear()

    async def _run(self) -> None:
        backoff = self.poll_interval
        while not self.stopping:
            # Cleared before the read, so a commit that lands during it wakes the next one.
            self._wake.clear()
            try:
                events = await run_in_threadpool(self.store.log.events_after, self.cursor, PAGE)
            except PartitionNotifyError as exc:
                log.warning("hub: reading the event log failed: %s", exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
                continue
            backoff = self.poll_interval
            for e in events:
                self._dispatch(HubEvent.of(e))
                self.cursor = e.event_id
            if len(events) < PAGE:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.fallback_interval)

    def _dispatch(self, event: HubEvent) -> None:
        for listener in list(self._listeners.get(event.table, ())):
            try:
                listener(event)
            except Exception:
                log.exception("hub listener failed on event %d", event.event_id)
