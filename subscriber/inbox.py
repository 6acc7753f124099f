"""What the subscriber's dispatcher thread works through, one item at a time, in order."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from partition_notify.store import LoggedEvent
from partition_notify.subscriber.sequencer import Followed
from partition_notify.subscriber.subscription import Subscription
from partition_notify.transports import RawMessage

from partition_notify.contract import AnyMessage, decode
from partition_notify.core.errors import MalformedMessageError

log = logging.getLogger("partition_notify.subscriber.subscriber")


@dataclass(frozen=True, slots=True)
class Recheck:
    """A topic's live message could not be verified: read the topic from the log."""

    topic: str


@dataclass(frozen=True, slots=True)
class Live:
    raw: RawMessage


@dataclass(frozen=True, slots=True)
class History:
    sub: Subscription
    messages: list[AnyMessage]
    #: Topics first followed by this subscription: catch up from the log first.
    followed: Followed


@dataclass(frozen=True, slots=True)
class Reconnected:
    """The consumer re-subscribed: fill every followed topic from the log."""


Item = Live | History | Reconnected | Recheck | None


def decode_logged(ev: LoggedEvent) -> AnyMessage | None:
    """An event read back from the log. Not counted as received; a malformed one is
    usually the copy of one that came live, so it gets a debug line only."""
    headers = {str(k): str(v) for k, v in ev.headers.items()}
    try:
        return decode(ev.body.encode(), headers)
    except MalformedMessageError as exc:
        log.debug(
            "skipping malformed event %d of topic %s read from the log: %s",
            ev.event_id,
            ev.topic,
            exc,
        )
        return None


class Malformed(Protocol):
    malformed: int


def decode_stored(bodies: list[str], stats: Malformed) -> list[AnyMessage]:
    """Retained set-done bodies; a malformed one is counted and skipped."""
    out: list[AnyMessage] = []
    for body in bodies:
        try:
            out.append(decode(body.encode()))
        except MalformedMessageError as exc:
            stats.malformed += 1
            log.warning("skipping malformed stored message: %s", exc)
    return out
