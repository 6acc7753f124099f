"""A draft's message built once: validated by pydantic, then copied with each real id.

Every publish builds its message twice, once with the widest ids to check its
size before anything is logged, once in the write transaction with the ids
the log hands out. Only ids, times and the message id differ between the
two, all made by us, so the second is a copy of the first with those fields
replaced (``model_copy``: no second validation; bench/durable_publish.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import cast

from pydantic import BaseModel

from partition_notify.contract import AnyMessage

Build = Callable[[int, int, float], AnyMessage]


def ids(event_id: int, seq: int, now: float) -> dict[str, object]:
    """The fields that differ between two builds of one draft (python names)."""
    return {
        "event_id": event_id,
        "topic_seq": seq,
        "timestamp": int(now),
        "timestamp_ms": int(now * 1000),
        "message_id": uuid.uuid4().hex,
    }


def once(model: type[BaseModel], fixed: Mapping[str, object],
         varying: Callable[[float], Mapping[str, object]] | None = None) -> Build:
    """A build that validates ``fixed`` plus the ids on its first call and copies after.

    ``varying(now)``: further fields that depend on the time (a set-done's expiry).
    """
    template: list[AnyMessage] = []

    def build(event_id: int, seq: int, now: float) -> AnyMessage:
        fields = ids(event_id, seq, now)
        if varying is not None:
            fields.update(varying(now))
        if not template:
            template.append(cast(AnyMessage, model.model_validate({**fixed, **fields})))
            return template[0]
        return template[0].model_copy(update=fields)

    return build
