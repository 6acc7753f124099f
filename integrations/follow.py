"""Read the event log forward for many watchers with one query per poll.

Event-driven scheduler triggers must not ask "is X done?" (they would fire
forever); they follow the log from a durable cursor instead. One follower
thread per store serves every watcher of the process: it reads the events
after the lowest position once, decodes each set-done once and hands it to
every watcher still behind it that wants it. A watcher with a cursor gets an
event only after its cursor has durably moved past it (store/cursor_take.py),
all such watchers of one event in one transaction, on this thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from partition_notify.integrations.withdrawn import taken_back
from partition_notify.store import Store
from partition_notify.store.cursor_take import CursorTaker
from partition_notify.transports.embedded import commit_signal

from partition_notify.contract import SetDoneMessage, decode
from partition_notify.contract.messages import HCAT_EVENT, PARTITION_DONE, PN_TABLE
from partition_notify.core.errors import MalformedMessageError, PartitionNotifyError

log = logging.getLogger(__name__)

#: Events read per query; a watcher far behind catches up in batches this size.
BATCH = 1000
#: After a store error, wait this long (doubling up to the cap) before retrying.
MAX_BACKOFF_SECONDS = 5.0


@dataclass(eq=False)
class Watch:
    """One watcher: the tables it follows, an optional spec filter, and where it is."""

    tables: frozenset[str]  # "db.table"
    position: int
    deliver: Callable[[SetDoneMessage], None]
    wanted: Mapping[str, str] | None = None
    #: Moved durably past each event before ``deliver`` sees it, and nothing is
    #: delivered that it is not before: a restarted or reassigned watcher (or a
    #: twin on the same name) never hands the same set-done over twice. Dying
    #: between the move and the hand-over loses that one event instead.
    cursor: str | None = None
    delivered: int = field(default=0)
    #: A watcher with a cursor holds at most one event taken and not yet handed on:
    #: set when one is delivered, cleared by :meth:`LogFollower.resume`.
    busy: bool = field(default=False)

    def wants(self, event_id: int, table: str) -> bool:
        return not self.busy and event_id > self.position and table in self.tables

    def matches(self, msg: SetDoneMessage) -> bool:
        return self.wanted is None or compatible(msg.partition_spec, self.wanted)


class LogFollower:
    """A daemon thread following ``store``'s event log on behalf of :class:`Watch`es."""

    def __init__(self, store: Store, poll_interval_seconds: float, wakeups: bool = True) -> None:
        self.store = store
        self.poll = poll_interval_seconds
        self.queries = 0
        self._watches: list[Watch] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._signal = commit_signal(store.log)
        self._wakeups = wakeups
        self._taker: CursorTaker | None = None  # made by the thread on first need
        if wakeups:  # other processes' commits wake us too (CommitSignal.fallback)
            self._signal.acquire_wakeups()
        self._thread = threading.Thread(target=self._run, name="pn-log-follower", daemon=True)
        self._thread.start()

    def add(self, watch: Watch) -> None:
        with self._lock:
            self._watches.append(watch)
        self._nudge()

    def remove(self, watch: Watch) -> None:
        with self._lock:
            if watch in self._watches:
                self._watches.remove(watch)

    def close(self, timeout: float = 5.0) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._nudge()
        if self._wakeups:
            self._signal.release_wakeups(timeout)
        self._thread.join(timeout)
        if self._taker is not None and not self._thread.is_alive():
            self._taker.close()

    def resume(self, watch: Watch) -> None:
        """``watch`` handed its event on: take and deliver its next one."""
        watch.busy = False
        self._signal.committed()  # a new generation: a read under way does not sleep through it

    def _nudge(self) -> None:
        self._signal.nudge()

    def _interval(self) -> float:
        return self._signal.fallback(self.poll) if self._wakeups else self.poll

    def _run(self) -> None:
        backoff = self._interval()
        while not self._stop.is_set():
            generation = self._signal.generation()
            try:
                full = self._once()
                backoff = self._interval()
            except PartitionNotifyError as exc:
                log.warning("following the event log failed (retrying): %s", exc)
                full = False
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
            if full:
                continue
            # Commits wake us at once: in-process ones through the log's
            # listeners, other processes' through store/wakeups.py.
            self._signal.wait(generation, backoff, self._stop)

    def _once(self) -> bool:
        with self._lock:
            watches = [w for w in self._watches if not w.busy]
        if not watches:
            return False
        low = min(w.position for w in watches)
        events = self.store.log.events_after(low, BATCH)
        self.queries += 1
        undone = taken_back(events)  # withdrawn later in this read: no run for them
        for ev in events:
            if ev.headers.get(HCAT_EVENT) != PARTITION_DONE or ev.event_id in undone:
                continue
            table = str(ev.headers.get(PN_TABLE, ""))
            behind = [w for w in watches if w.wants(ev.event_id, table)]
            if not behind:
                continue
            try:
                msg = decode(ev.body)
            except MalformedMessageError as exc:
                log.warning("skipping malformed logged event %d: %s", ev.event_id, exc)
                continue
            if not isinstance(msg, SetDoneMessage):
                continue
            self._hand_over(ev.event_id, msg, [w for w in behind if w.matches(msg)])
        if events:
            top = events[-1].event_id
            for w in watches:
                if not w.busy:  # a busy one stays at the event it holds
                    w.position = max(w.position, top)
        return len(events) == BATCH

    def _hand_over(self, event_id: int, msg: SetDoneMessage, watches: list[Watch]) -> None:
        keyed = [w for w in watches if w.cursor is not None]
        for w in watches:
            if w.cursor is None:  # first: they need not wait for the cursors' commit
                w.delivered += 1
                w.deliver(msg)
        if not keyed:
            return
        if self._taker is None:
            self._taker = CursorTaker(self.store)
        try:
            taken = self._taker.take([str(w.cursor) for w in keyed], event_id)
        except PartitionNotifyError as exc:
            # Handed over anyway: a possible repeat rather than a loss.
            log.warning("could not move cursors past event %d: %s", event_id, exc)
            taken = [True] * len(keyed)
        for w, ok in zip(keyed, taken, strict=True):
            w.position = event_id
            if ok:
                w.busy = True  # before deliver: its resume() may come at once
                w.delivered += 1
                w.deliver(msg)


def compatible(done: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    """True when the set ``done`` names overlaps the partitions ``wanted`` selects.

    Every key both specs mention must have the same value: ``datestamp=X``
    done is relevant to a filter ``region=us`` (it covers ``X/us``), while
    ``datestamp=X/region=eu`` is not.
    """
    return all(done[k] == v for k, v in wanted.items() if k in done)
