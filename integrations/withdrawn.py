"""Set-dones a later event of the same read took back: not a completion any more.

A scheduler that catches up (a triggerer restarted, a sensor's next tick, the
push sink after an outage) may read a set-done and, further on in the same
read, the ``PARTITION_WITHDRAWN`` that took it back (its ``setDones``) or the
``PARTITION_DONE_RETRACTED`` of a derived one (its ``retractedEventId``). Such
a set-done must not start a run: :func:`taken_back` names them. One read at a
time: a withdrawal read later than its set-done cannot stop a run already
started (docs/schedulers.md, "Withdrawals").
"""

from __future__ import annotations

from collections.abc import Iterable

from partition_notify.store import LoggedEvent

from partition_notify.contract import (
    AnyMessage,
    PartitionDoneRetractedMessage,
    PartitionWithdrawnMessage,
    decode,
)
from partition_notify.contract.messages import (
    HCAT_EVENT,
    PARTITION_DONE_RETRACTED,
    PARTITION_WITHDRAWN,
)
from partition_notify.core.errors import MalformedMessageError

TAKING_BACK = frozenset({PARTITION_WITHDRAWN, PARTITION_DONE_RETRACTED})


def taking_back(events: Iterable[LoggedEvent]) -> list[AnyMessage]:
    """The withdrawals and retractions among ``events`` (malformed ones skipped)."""
    out: list[AnyMessage] = []
    for ev in events:
        if ev.headers.get(HCAT_EVENT) in TAKING_BACK:
            try:
                out.append(decode(ev.body))
            except MalformedMessageError:  # the relay and readers log those
                continue
    return out


def taken_back(events: Iterable[LoggedEvent]) -> set[int]:
    """Event ids of the set-dones that a withdrawal or retraction among ``events`` undid."""
    ids: set[int] = set()
    for msg in taking_back(events):
        if isinstance(msg, PartitionWithdrawnMessage):
            ids.update(sd.event_id for sd in msg.set_dones)
        elif isinstance(msg, PartitionDoneRetractedMessage):
            ids.add(msg.retracted_event_id)
    return ids
