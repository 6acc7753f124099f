"""The one retry schedule: capped exponential delays, optional jitter, optional deadline.

Every retry loop (STOMP reconnect, the embedded consumer's log reads, the
relay, the Kafka consumer) builds a :class:`Backoff` with its own constants,
so each keeps the schedule it was tuned for while the arithmetic lives here.
The exponent stops growing once the cap is reached, so a failure count of
any size (a relay failing for days) still gives the cap.
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass, field


@dataclass(slots=True)
class Backoff:
    """Delays ``initial * factor ** (n - 1)`` after the n-th consecutive failure, at most ``cap``.

    ``jitter`` adds up to that fraction of each wait at random (0.2: 100-120 %),
    so many clients that lost the same broker do not come back in step.
    """

    initial: float
    cap: float
    factor: float = 2.0
    jitter: float = 0.0
    failures: int = 0
    _steps_to_cap: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not (0 < self.initial <= self.cap) or self.factor < 1 or self.jitter < 0:
            raise ValueError(f"backoff needs 0 < initial ({self.initial}) <= cap ({self.cap}), "
                             f"factor ({self.factor}) >= 1 and jitter ({self.jitter}) >= 0")
        ratio = self.cap / self.initial
        self._steps_to_cap = 0 if self.factor == 1 or ratio == 1 else (
            math.ceil(math.log(ratio, self.factor)))

    def delay(self, failures: int) -> float:
        """The nominal delay after ``failures`` consecutive failures (``initial`` for 1 or less)."""
        steps = min(max(failures - 1, 0), self._steps_to_cap)
        return min(self.cap, self.initial * self.factor ** steps)

    def failed(self) -> float:
        """Count one more failure; the nominal delay before the next attempt."""
        self.failures += 1
        return self.delay(self.failures)

    def reset(self) -> None:
        """An attempt succeeded: the next failure starts again at ``initial``."""
        self.failures = 0

    def wait(self, stop: threading.Event, delay: float, deadline: float | None = None) -> bool:
        """Wait ``delay`` plus jitter on ``stop``, never past ``deadline`` (monotonic).

        True when the wait ran out (try again), False when ``stop`` was set.
        """
        pause = delay * (1 + random.random() * self.jitter) if self.jitter else delay
        if deadline is not None:
            pause = min(pause, max(deadline - time.monotonic(), 0.0))
        return not stop.wait(pause)
