"""A subscription callback that records messages and lets a test await them."""

from __future__ import annotations

import threading
import time
from typing import Any


class Collector:
    """Messages of one subscription in arrival order; :meth:`wait_for` awaits a count.

    Subclasses look at each message as it arrives in :meth:`observe` (in the
    subscriber's thread, before the message is recorded).
    """

    #: Seconds :meth:`wait_for` waits unless told otherwise.
    timeout: float = 30.0

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self._cond = threading.Condition()

    def observe(self, msg: Any) -> None:
        """Called for each message before it is recorded; nothing by default."""

    def __call__(self, msg: Any) -> None:
        self.observe(msg)
        with self._cond:
            self.messages.append(msg)
            self._cond.notify_all()

    def wait_for(self, n: int, timeout: float | None = None) -> list[Any]:
        """The messages once ``n`` arrived, or those there are at the deadline."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        with self._cond:
            while len(self.messages) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return list(self.messages)
