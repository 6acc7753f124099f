"""PARTITION_LATE / PARTITION_LATE_RECOVERED on the wire: envelope, headers, decode."""

from __future__ import annotations

import pytest

from partition_notify.contract import (
    PartitionLateMessage,
    PartitionLateRecoveredMessage,
    decode,
    to_envelope,
)
from partition_notify.core.errors import MalformedMessageError

COMMON = {"server": "s", "db": "sales", "table": "orders", "timestamp": 1, "messageId": "m",
          "eventId": 5, "topic": "hcat.sales.orders", "topicSeq": 3, "expectation": "daily",
          "partitionSpec": {"datestamp": "20300101"}, "partitionSpecString": "datestamp=20300101",
          "logicalDate": "2030-01-01T00:00:00+00:00", "deadline": 1893477600}


@pytest.mark.parametrize(("cls", "extra"), [
    (PartitionLateMessage, {}),
    (PartitionLateRecoveredMessage, {"setDoneEventId": 9, "lateBySeconds": 60}),
])
def test_round_trip_with_hcat_headers(cls: type, extra: dict[str, object]) -> None:
    msg = cls.model_validate({**COMMON, **extra})
    env = to_envelope(msg)
    assert env.headers["HCAT_EVENT"] == msg.event_type
    assert env.headers["PN_TABLE"] == "sales.orders" and env.key == "sales.orders"
    assert decode(env.body, env.headers) == msg
    with pytest.raises(MalformedMessageError, match="contradicts"):
        decode(env.body, {**env.headers, "HCAT_EVENT": "PARTITION_DONE"})


def test_recovered_needs_the_set_done_event() -> None:
    body = PartitionLateMessage.model_validate(COMMON).model_dump_json(by_alias=True)
    with pytest.raises(MalformedMessageError, match="setDoneEventId"):
        decode(body.replace("PARTITION_LATE", "PARTITION_LATE_RECOVERED"))
