"""A clock the test moves by hand."""

from __future__ import annotations


class FakeClock:
    """A clock the test moves by hand: expiry without waiting."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
