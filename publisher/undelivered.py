"""The error for a write the store committed but the broker did not confirm."""

from __future__ import annotations

from collections.abc import Sequence

from partition_notify.contract import AnyMessage
from partition_notify.core.errors import MessageRejected, PublishError, TransportError


def saved_but_undelivered(exc: TransportError, messages: Sequence[AnyMessage]) -> PublishError:
    """The error for a write the store committed but the broker did not confirm.

    It keeps the kind (PublishTimeout stays a timeout, MessageRejected keeps
    what was refused) for callers that branch on it, says truthfully what
    happens next, and names the saved events in ``logged``.
    """
    first, last = messages[0].event_id, messages[-1].event_id
    if isinstance(exc, MessageRejected):
        text = (f"{exc} — events {first}..{last} are saved, but the broker refused them for "
                "good: the relay (partition-notify serve) retries and dead-letters them after "
                "PN_RELAY_MAX_ATTEMPTS refusals (partition-notify dead-letters list)")
        err: PublishError = MessageRejected(text, exc.rejected, exc.confirmed)
    else:
        text = (f"{exc} — events {first}..{last} are saved and will be delivered by the "
                "relay (partition-notify serve)")
        err = (type(exc) if isinstance(exc, PublishError) else PublishError)(text)
    err.logged = tuple(m.event_id for m in messages)
    return err
