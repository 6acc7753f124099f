"""Exact de-duplication in bounded memory: one window of sequence numbers per topic.

A topic's ``topicSeq`` is gap-free in the event log, so what a subscriber has
handled is a contiguous prefix ``1..high`` plus a few numbers above it that
arrived early (concurrent writers and the relay interleave on the broker).
The set above ``high`` collapses as the holes fill; a hole that the log
cannot fill is declared lost (reported as a gap) instead of being kept.
Memory is O(topics + out-of-order spread), whatever the message count.
"""

from __future__ import annotations

from collections.abc import Iterator


class SeqWindow:
    """The sequence numbers of one topic already handed on."""

    __slots__ = ("above", "high")

    def __init__(self, high: int) -> None:
        #: Every number <= high is handled (delivered, or declared lost).
        self.high = high
        #: Handled numbers above ``high``; never contains ``high + 1``.
        self.above: set[int] = set()

    def seen(self, seq: int) -> bool:
        return seq <= self.high or seq in self.above

    def add(self, seq: int) -> None:
        if seq <= self.high:
            return
        if seq == self.high + 1:
            self.high = seq
            self._collapse()
        else:
            self.above.add(seq)

    def holes(self, below: int) -> Iterator[tuple[int, int]]:
        """Runs ``(first, last)`` of unhandled numbers between ``high`` and ``below``."""
        start = self.high + 1
        for s in sorted(x for x in self.above if x < below):
            if s > start:
                yield start, s - 1
            start = s + 1
        if below > start:
            yield start, below - 1

    def give_up_through(self, seq: int) -> None:
        """Treat everything up to ``seq`` as handled (it is lost: reported elsewhere)."""
        if seq <= self.high:
            return
        self.high = seq
        self.above = {s for s in self.above if s > seq}
        self._collapse()

    def _collapse(self) -> None:
        while self.above and self.high + 1 in self.above:
            self.high += 1
            self.above.discard(self.high)
