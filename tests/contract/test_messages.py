"""The JSON message contract: HCatalog fields, headers, and what decode refuses."""

from __future__ import annotations

import json
import uuid

import pytest

from partition_notify.contract import (
    ADD_PARTITION,
    PARTITION_DONE,
    AddPartitionMessage,
    SetDoneMessage,
    decode,
    json_schemas,
    to_envelope,
)
from partition_notify.contract.messages import MAX_BODY_BYTES
from partition_notify.core.errors import MalformedMessageError

HCAT_FIELDS = {"server": str, "servicePrincipal": str, "db": str, "table": str, "timestamp": int}


def _common(event_id: int = 7) -> dict[str, object]:
    return {
        "server": "thrift://metastore:9083", "servicePrincipal": "hive/_HOST@EXAMPLE.COM",
        "db": "sales", "table": "orders", "timestamp": 1_298_851_200,
        "timestampMs": 1_298_851_200_123, "messageId": uuid.uuid4().hex, "eventId": event_id,
        "topic": "hcat.sales.orders", "topicSeq": 3, "revision": 2,
    }


def add_partition() -> AddPartitionMessage:
    return AddPartitionMessage.model_validate({
        **_common(), "partitions": [{"datestamp": "20110228", "region": "us"}],
        "partitionKeys": ["datestamp", "region"], "locations": ["hdfs:///w/ds=20110228/region=us"],
    })


def set_done() -> SetDoneMessage:
    return SetDoneMessage.model_validate({
        **_common(8), "partitionSpec": {"datestamp": "20110228"},
        "partitionSpecString": "datestamp=20110228", "expiresAt": 1_299_456_000,
    })


def test_add_partition_body_and_headers() -> None:
    env = to_envelope(add_partition())
    body = json.loads(env.body)
    for name, typ in HCAT_FIELDS.items():
        assert isinstance(body[name], typ), name
    assert body["partitions"] == [{"datestamp": "20110228", "region": "us"}]
    assert list(body["partitions"][0]) == ["datestamp", "region"]
    assert isinstance(body["eventId"], int) and isinstance(body["messageId"], str)
    assert isinstance(body["topicSeq"], int)
    assert env.headers["HCAT_EVENT"] == ADD_PARTITION
    assert env.headers["HCAT_MESSAGE_FORMAT"] == "json"
    assert env.headers["HCAT_MESSAGE_VERSION"]
    assert env.headers["PN_EVENT_ID"] == "7"
    assert env.topic == "hcat.sales.orders" and env.key == "sales.orders"
    # JMS property names must be Java identifiers.
    assert all(h.isidentifier() for h in env.headers)


def test_set_done_body_and_headers() -> None:
    env = to_envelope(set_done())
    body = json.loads(env.body)
    for name, typ in HCAT_FIELDS.items():
        assert isinstance(body[name], typ), name
    assert body["partitionSpec"] == {"datestamp": "20110228"}
    assert body["partitionSpecString"] == "datestamp=20110228"
    assert body["eventType"] == PARTITION_DONE
    assert env.headers["HCAT_EVENT"] == PARTITION_DONE


@pytest.mark.parametrize("make", [add_partition, set_done])
def test_encode_decode_round_trip(make) -> None:
    msg = make()
    env = to_envelope(msg)
    assert decode(env.body, env.headers) == msg
    assert decode(env.body.decode()) == msg


def test_hcatalog_consumer_extra_fields_ignored_by_us_too() -> None:
    body = json.loads(to_envelope(set_done()).body)
    body["somethingNew"] = {"nested": [1, 2]}
    assert decode(json.dumps(body).encode()).message_id == body["messageId"]


def test_event_type_taken_from_header_when_body_lacks_it() -> None:
    env = to_envelope(set_done())
    body = json.loads(env.body)
    del body["eventType"]
    assert isinstance(decode(json.dumps(body), env.headers), SetDoneMessage)


def _body(**changes: object) -> bytes:
    body = json.loads(to_envelope(set_done()).body)
    for k, v in changes.items():
        if v is ...:
            del body[k]
        else:
            body[k] = v
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("raw", "headers", "needle"),
    [
        (b"{not json", None, "not JSON"),
        (b"", None, "not JSON"),
        (b"[1, 2]", None, "must be a JSON object, got list"),
        (b"\xff\xfe{}", None, "not UTF-8"),
        (b'{"eventType": "ALTER_TABLE"}', None, "unknown event type 'ALTER_TABLE'"),
        (b'{"db": "x"}', None, "unknown event type None"),
        (_body(eventId="seven"), None, "eventId'"),
        (_body(eventId=0), None, "eventId'"),
        (_body(topicSeq=None), None, "topicSeq'"),
        (_body(timestamp="yesterday"), None, "timestamp'"),
        (_body(partitionSpec=["datestamp"]), None, "partitionSpec'"),
        (_body(partitionSpec={"datestamp": 1}), None, "partitionSpec."),
        (_body(db=...), None, "db'"),
        (_body(messageId=...), None, "messageId'"),
        (_body(), {"HCAT_EVENT": ADD_PARTITION}, "contradicts"),
        (b" " * (MAX_BODY_BYTES + 1), None, f"at most {MAX_BODY_BYTES}"),
    ],
)
def test_decode_rejects(raw: bytes, headers: dict[str, str] | None, needle: str) -> None:
    with pytest.raises(MalformedMessageError) as info:
        decode(raw, headers)
    assert needle in str(info.value)


def test_oversized_body_refused_before_parsing() -> None:
    # Valid JSON, just too big: size is checked first.
    big = _body(server="x" * MAX_BODY_BYTES)
    with pytest.raises(MalformedMessageError, match="bytes; at most"):
        decode(big)


def test_json_schemas_list_the_hcatalog_fields() -> None:
    schemas = json_schemas()
    add, done = schemas["add_partition"], schemas["mark_set_done"]
    for schema in (add, done):
        assert set(HCAT_FIELDS) <= set(schema["properties"])
        assert {"db", "table", "server", "timestamp", "messageId", "eventId"} <= set(
            schema["required"])
    assert "partitions" in add["required"]
    assert {"partitionSpec", "partitionSpecString"} <= set(done["required"])
