"""A subscriber's counters (``sub.stats``), exported as ``pn_subscriber_*`` (metrics.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class SubscriberStats:
    #: Live messages the dispatcher decoded (not the coalesced ones).
    received: int = 0
    malformed: int = 0
    gaps: int = 0
    missing_events: int = 0
    reconnects: int = 0
    #: Repeats dropped by sequence number (any subscription).
    duplicates: int = 0
    #: Messages read from the event log to fill a jump or a reconnect.
    filled: int = 0
    fill_errors: int = 0
    #: Messages whose topicSeq the log does not hold or holds as another message.
    foreign: int = 0
    #: Live messages dropped while the inbox was full: read from the event log instead.
    coalesced: int = 0
    #: The most items the inbox held at once (inbox_queue.py).
    inbox_high_water: int = 0
