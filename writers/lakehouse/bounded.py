"""Table-format reads under a deadline: one hung catalog or object store cannot stall the
follower's other tables.

pyiceberg and delta-rs take no deadline of their own for every call (a catalog's
HTTP client, a SQL catalog's pool, an object store listing), so each read runs on a
daemon thread and the follower waits at most ``timeout`` for it. A thread stuck in a
driver cannot be stopped: the read is abandoned, the table is skipped (no second
thread for it) until that read returns, and at most ``max_stuck`` reads may be stuck
at once (more stuck reads: every read is refused until one returns), so threads stay
bounded. Daemon threads: a stuck read never keeps ``serve`` from exiting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from partition_notify.core.errors import TableReadTimeout

T = TypeVar("T")
#: Reads that may be stuck at once (one thread each) before every read is refused.
MAX_STUCK_READS = 16


class _Call(Generic[T]):
    def __init__(self, fn: Callable[[], T]) -> None:
        self.fn = fn
        self.done = threading.Event()
        #: (the value,) once fn returned; None while running or after it raised.
        self.result: tuple[T] | None = None
        self.error: BaseException | None = None

    def __call__(self) -> None:
        try:
            self.result = (self.fn(),)
        except BaseException as exc:  # handed to the waiting follower, re-raised there
            self.error = exc
        finally:
            self.done.set()


class BoundedReads:
    """Run reads keyed by table with a deadline; remember the ones still stuck."""

    def __init__(self, timeout: float, *, name: str = "pn-table-read",
                 max_stuck: int = MAX_STUCK_READS) -> None:
        self.timeout = timeout
        self.name = name
        self.max_stuck = max_stuck
        #: key -> the done-event of its read that timed out
        self._stuck: dict[Hashable, threading.Event] = {}

    def stuck(self, key: Hashable) -> bool:
        """True while the read of ``key`` that timed out has not returned."""
        done = self._stuck.get(key)
        if done is not None and done.is_set():
            del self._stuck[key]
            return False
        return done is not None

    def stuck_count(self) -> int:
        for key in [k for k, done in self._stuck.items() if done.is_set()]:
            del self._stuck[key]
        return len(self._stuck)

    def run(self, key: Hashable, fn: Callable[[], T], what: str) -> T:
        """``fn()``'s result or exception; TableReadTimeout after ``timeout`` seconds."""
        return self.wait(self.start(key, fn, what), what)

    def start(self, key: Hashable, fn: Callable[[], T], what: str) -> Pending[T]:
        """Start ``fn()`` on its own thread; :meth:`wait` for it. Several reads started
        before waiting run at once (I/O in the drivers releases the GIL)."""
        if self.stuck(key):
            raise TableReadTimeout(f"{what}: the previous read has not returned yet")
        if self.stuck_count() >= self.max_stuck:
            raise TableReadTimeout(f"{what}: not read: {self.max_stuck} reads are stuck")
        call = _Call(fn)
        threading.Thread(target=call, name=f"{self.name}:{key}", daemon=True).start()
        return Pending(key, call, time.monotonic() + self.timeout)

    def wait(self, pending: Pending[T], what: str) -> T:
        """The started read's result or exception; TableReadTimeout once ``timeout``
        seconds have passed since it started."""
        call = pending.call
        if not call.done.wait(max(0.0, pending.deadline - time.monotonic())):
            self._stuck[pending.key] = call.done
            raise TableReadTimeout(f"{what}: no answer in {self.timeout:g} s; skipped until "
                                   "that read returns")
        if call.result is None:
            assert call.error is not None
            raise call.error
        return call.result[0]


@dataclass(frozen=True)
class Pending(Generic[T]):
    """A read started by :meth:`BoundedReads.start`."""

    key: Hashable
    call: _Call[T]
    deadline: float
