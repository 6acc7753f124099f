"""Wire format of the messages, HCatalog-compatible.

Bodies are JSON objects whose HCatalog fields (``server``,
``servicePrincipal``, ``db``, ``table``, ``timestamp``, ``partitions``) keep
HCatalog's names and meaning, so existing HCatalog/Oozie JMS consumers can
read them; the extra fields (``messageId``, ``eventId``, ``topicSeq`` ...)
are ignored by those consumers and used by ours.

Headers (JMS string properties on ActiveMQ, record headers on Kafka):
``HCAT_EVENT`` (``ADD_PARTITION``, ``DROP_PARTITION`` or ``PARTITION_DONE``; ours:
``PARTITION_LATE`` and ``PARTITION_LATE_RECOVERED``, see :mod:`partition_notify.deadlines`,
``COMMITS_MISSED``, see :mod:`partition_notify.writers.lakehouse`, ``PARTITION_WITHDRAWN``
and ``PARTITION_DONE_RETRACTED``, see :mod:`partition_notify.publisher.withdrawals`),
``HCAT_MESSAGE_VERSION``, ``HCAT_MESSAGE_FORMAT=json``, and ours,
``PN_EVENT_ID``, ``PN_MESSAGE_ID``, ``PN_TABLE`` (the routing key) and, on a
set-done a completeness rule derived, ``PN_DERIVED_RULE`` (the rule's name);
JMS property names must be Java identifiers, hence no dashes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from partition_notify.core.errors import MalformedMessageError

HCAT_EVENT = "HCAT_EVENT"
HCAT_MESSAGE_VERSION = "HCAT_MESSAGE_VERSION"
HCAT_MESSAGE_FORMAT = "HCAT_MESSAGE_FORMAT"
PN_EVENT_ID = "PN_EVENT_ID"
PN_MESSAGE_ID = "PN_MESSAGE_ID"
PN_TABLE = "PN_TABLE"
#: Only on a derived set-done: the name of the completeness rule that derived it.
PN_DERIVED_RULE = "PN_DERIVED_RULE"
MESSAGE_VERSION = "0.1"
ADD_PARTITION: Literal["ADD_PARTITION"] = "ADD_PARTITION"
DROP_PARTITION: Literal["DROP_PARTITION"] = "DROP_PARTITION"
PARTITION_DONE: Literal["PARTITION_DONE"] = "PARTITION_DONE"
PARTITION_LATE: Literal["PARTITION_LATE"] = "PARTITION_LATE"
PARTITION_LATE_RECOVERED: Literal["PARTITION_LATE_RECOVERED"] = "PARTITION_LATE_RECOVERED"
COMMITS_MISSED: Literal["COMMITS_MISSED"] = "COMMITS_MISSED"
PARTITION_WITHDRAWN: Literal["PARTITION_WITHDRAWN"] = "PARTITION_WITHDRAWN"
PARTITION_DONE_RETRACTED: Literal["PARTITION_DONE_RETRACTED"] = "PARTITION_DONE_RETRACTED"
EVENT_TYPES = (ADD_PARTITION, DROP_PARTITION, PARTITION_DONE, PARTITION_LATE,
               PARTITION_LATE_RECOVERED, COMMITS_MISSED, PARTITION_WITHDRAWN,
               PARTITION_DONE_RETRACTED)
#: The longest ``reason`` of a ``COMMITS_MISSED`` message (a longer one is cut).
MAX_REASON_CHARS = 1000
#: The publisher's default size limit (``PN_MAX_MESSAGE_BYTES``): the largest
#: body it logs and sends. 1 MiB: ActiveMQ takes far more, Kafka's broker
#: default (message.max.bytes 1,048,588) about this much.
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20
#: Subscribers accept bodies up to this ceiling, which also caps the
#: publisher's setting: nothing a publisher accepted is dropped as too large.
#: Anything larger on a topic is not ours: refuse before parsing.
MAX_BODY_BYTES = 16 << 20


class _Message(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)

    server: str = Field(description="Service that published the message (HCatalog: metastore URI).")
    service_principal: str = Field(
        "", alias="servicePrincipal", description="Kerberos principal of the publisher, or ''."
    )
    db: str
    table: str
    timestamp: int = Field(description="Commit time, epoch seconds (HCatalog).")
    message_id: str = Field(alias="messageId",
                            description="Stable unique id (UUID hex, version 7: time-ordered).")
    event_id: int = Field(
        alias="eventId", ge=1, description="Gap-free id in commit order across the whole store."
    )
    topic: str
    topic_seq: int = Field(
        alias="topicSeq", ge=1, description="Gap-free per-topic sequence; a jump is a gap."
    )
    revision: int | None = Field(None, description="Write revision that produced the event.")
    timestamp_ms: int | None = Field(
        None, alias="timestampMs", description="Commit time, epoch milliseconds."
    )


class AddPartitionMessage(_Message):
    """One new partition (HCatalog ``ADD_PARTITION``)."""

    event_type: Literal["ADD_PARTITION"] = Field(ADD_PARTITION, alias="eventType")
    partitions: list[dict[str, str]] = Field(
        description="Key->value maps, keys lower-case in the table's partition-key order."
    )
    partition_keys: list[str] = Field(alias="partitionKeys")
    locations: list[str | None] = Field(
        default_factory=list, description="Storage location of each partition, same order."
    )
    replace: bool | None = Field(
        None,
        description="True when the partition was announced before and this announcement "
        "supersedes it (an overwrite: reprocess it); absent on a first announcement. "
        "`revision` tells the two writes apart.",
    )


class DropPartitionMessage(_Message):
    """A partition that was announced no longer exists (HCatalog ``DROP_PARTITION``).

    It is no longer present (``is_partition_present`` says False) and a later
    write announces it again. ``reason`` says why; consumers must accept reasons
    they do not know (the same event will also carry withdrawals)."""

    event_type: Literal["DROP_PARTITION"] = Field(DROP_PARTITION, alias="eventType")
    partitions: list[dict[str, str]] = Field(
        description="Key->value maps, keys lower-case in the table's partition-key order."
    )
    partition_keys: list[str] = Field(alias="partitionKeys")
    locations: list[str | None] = Field(
        default_factory=list, description="Last announced location of each partition."
    )
    reason: str | None = Field(
        None,
        description="Why: 'overwrite' (a static overwrite deleted it and did not write it "
        "again), 'drop' (ALTER TABLE ... DROP PARTITION), or another reason.",
    )


class DerivedInput(BaseModel):
    """One input a completeness rule counted: which table, which value, which event."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)

    table: str = Field(description="db.table the input was announced on.")
    value: str = Field(
        description="What the rule counted: a value of its key, an hour or day, or a table."
    )
    event_id: int = Field(alias="eventId", ge=1, description="Event that brought the input.")


class DerivedFrom(BaseModel):
    """Why a set-done was derived: the completeness rule and the inputs it counted."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)

    table: str = Field(description="db.table the rule belongs to (the derived set-done's table).")
    rule: str = Field(description="Name of the rule (unique per table).")
    kind: str = Field(description="all-of, calendar, cross-table or quiet.")
    inputs: list[DerivedInput] = Field(description="The inputs that satisfied the rule.")


class SetDoneMessage(_Message):
    """A writer marked every partition matching ``partitionSpec`` done (``PARTITION_DONE``).

    ``derivedFrom`` is present only when ``serve`` derived the set-done from a
    completeness rule (partition_notify/rules/); consumers that ignore it see
    an ordinary set-done.
    """

    event_type: Literal["PARTITION_DONE"] = Field(PARTITION_DONE, alias="eventType")
    partition_spec: dict[str, str] = Field(
        alias="partitionSpec", description="Partial spec, keys sorted lexically."
    )
    spec: str = Field(
        alias="partitionSpecString",
        description="Canonical string: keys sorted, values Hive-escaped, joined by '/'.",
    )
    expires_at: int | None = Field(
        None, alias="expiresAt", description="Epoch seconds after which history drops it."
    )
    derived_from: DerivedFrom | None = Field(
        None, alias="derivedFrom",
        description="Set only on a set-done a completeness rule derived: the rule and inputs.",
    )


class _LateBase(_Message):
    expectation: str = Field(description="Name of the expectation (unique per table).")
    partition_spec: dict[str, str] = Field(
        alias="partitionSpec", description="The expected (rendered) spec, keys sorted lexically."
    )
    spec: str = Field(alias="partitionSpecString", description="Canonical string of the spec.")
    logical_date: str = Field(
        alias="logicalDate",
        description="The schedule instance, ISO 8601 in the schedule's time zone.",
    )
    deadline: int = Field(description="Epoch seconds by which a covering set-done was due.")


class PartitionLateMessage(_LateBase):
    """No set-done covered the expected spec by its deadline (``PARTITION_LATE``)."""

    event_type: Literal["PARTITION_LATE"] = Field(PARTITION_LATE, alias="eventType")


class PartitionLateRecoveredMessage(_LateBase):
    """A late spec was covered after all (``PARTITION_LATE_RECOVERED``)."""

    event_type: Literal["PARTITION_LATE_RECOVERED"] = Field(
        PARTITION_LATE_RECOVERED, alias="eventType"
    )
    set_done_event_id: int = Field(
        alias="setDoneEventId", ge=1, description="Event id of the covering set-done."
    )
    late_by_seconds: int = Field(
        alias="lateBySeconds", description="Set-done commit time minus the deadline."
    )


class CommitsMissedMessage(_Message):
    """Commits of an Iceberg/Delta table that were gone before ``serve`` read them (an
    expired snapshot, a cleaned log version, a rollback): their partitions and set-dones
    were never announced (``COMMITS_MISSED``). ``revision`` is the commit announcing
    continues after."""

    event_type: Literal["COMMITS_MISSED"] = Field(COMMITS_MISSED, alias="eventType")
    table_format: Literal["iceberg", "delta"] = Field(alias="format")
    # A default, not only a null: bodies are encoded without their None fields
    # (encode_body), so a gap before the first commit handled has no afterRevision at
    # all, and decode() refused it as malformed: subscribers dropped the gap itself.
    after_revision: int | None = Field(
        None, alias="afterRevision",
        description="The last commit handled before the gap; null or absent: none "
        "(followed from the table's first commit).")
    reason: str = Field(max_length=MAX_REASON_CHARS, description="What was found missing.")


class WithdrawnSetDone(BaseModel):
    """A set-done a withdrawal took back: is-set-done no longer counts it."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)
    spec: str = Field(description="Canonical spec of the set-done.")
    event_id: int = Field(alias="eventId", ge=1, description="Its PARTITION_DONE event.")


class PartitionWithdrawnMessage(_Message):
    """A writer or admin took a partition or a set back, e.g. its data is bad
    (``PARTITION_WITHDRAWN``). The partitions listed are gone (as after a drop) and
    the set-dones listed no longer count; a re-announce and set-done restate it."""

    event_type: Literal["PARTITION_WITHDRAWN"] = Field(PARTITION_WITHDRAWN, alias="eventType")
    partition_spec: dict[str, str] = Field(
        alias="partitionSpec", description="The spec withdrawn (partial: a set), keys sorted.")
    spec: str = Field(alias="partitionSpecString", description="Canonical string of the spec.")
    partitions: list[dict[str, str]] = Field(
        description="The announced partitions it matched (removed), in partition-key order.")
    partition_keys: list[str] = Field(alias="partitionKeys")
    set_dones: list[WithdrawnSetDone] = Field(
        default_factory=list, alias="setDones",
        description="Retained set-dones whose set shares a partition with the spec.")
    reason: str = Field(max_length=MAX_REASON_CHARS, description="Why, as the caller said.")


class PartitionDoneRetractedMessage(_Message):
    """A derived set-done no longer holds: an input it counted was withdrawn
    (``PARTITION_DONE_RETRACTED``). The rule derives the spec again once the input is back."""

    event_type: Literal["PARTITION_DONE_RETRACTED"] = Field(
        PARTITION_DONE_RETRACTED, alias="eventType")
    partition_spec: dict[str, str] = Field(alias="partitionSpec", description="The derived spec.")
    spec: str = Field(alias="partitionSpecString", description="Canonical string of the spec.")
    rule: str = Field(description="The completeness rule that had derived it.")
    retracted_event_id: int = Field(
        alias="retractedEventId", ge=1, description="The derived PARTITION_DONE retracted.")
    withdrawn: list[DerivedInput] = Field(
        description="The withdrawn inputs: table, value and PARTITION_WITHDRAWN event id.")


AnyWire = (
    AddPartitionMessage | DropPartitionMessage | SetDoneMessage | PartitionLateMessage
    | PartitionLateRecoveredMessage | CommitsMissedMessage | PartitionWithdrawnMessage
    | PartitionDoneRetractedMessage
)
Message = Annotated[AnyWire, Field(discriminator="event_type")]
_ADAPTER: pydantic.TypeAdapter[AnyWire] = pydantic.TypeAdapter(Message)


@dataclass(frozen=True, slots=True)
class Envelope:
    """What a transport moves: a topic, a routing key, headers and a body."""

    topic: str
    key: str
    headers: dict[str, str]
    body: bytes
    event_id: int = 0
    message_id: str = ""
    extra: dict[str, object] = field(default_factory=dict, compare=False)


def headers_for(message: AnyWire) -> dict[str, str]:
    headers = {
        HCAT_EVENT: message.event_type,
        HCAT_MESSAGE_VERSION: MESSAGE_VERSION,
        HCAT_MESSAGE_FORMAT: "json",
        PN_EVENT_ID: str(message.event_id),
        PN_MESSAGE_ID: message.message_id,
        PN_TABLE: f"{message.db}.{message.table}",
    }
    if isinstance(message, SetDoneMessage) and message.derived_from is not None:
        # A broker-side selector can route derived set-dones without parsing bodies.
        headers[PN_DERIVED_RULE] = message.derived_from.rule
    return headers


def encode_body(message: AnyWire) -> bytes:
    return message.model_dump_json(by_alias=True, exclude_none=True).encode()


def to_envelope(message: AnyWire) -> Envelope:
    headers = headers_for(message)
    return Envelope(
        topic=message.topic,
        key=headers[PN_TABLE],
        headers=headers,
        body=encode_body(message),
        event_id=message.event_id,
        message_id=message.message_id,
    )


def decode(body: bytes | str, headers: dict[str, str] | None = None) -> AnyWire:
    """Decode a body (and check its headers when given); raise MalformedMessageError."""
    obj = _json_object(body)
    if "eventType" not in obj and headers and HCAT_EVENT in headers:
        obj["eventType"] = headers[HCAT_EVENT]
    event = obj.get("eventType")
    if event not in EVENT_TYPES:
        raise MalformedMessageError(
            f"unknown event type {event!r}; expected one of {', '.join(EVENT_TYPES)}"
        )
    if headers and headers.get(HCAT_EVENT) not in (None, event):
        raise MalformedMessageError(
            f"header {HCAT_EVENT}={headers.get(HCAT_EVENT)!r} contradicts body eventType={event!r}"
        )
    try:
        return _ADAPTER.validate_python(obj)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise MalformedMessageError(
            f"{event} message field {where!r}: {first['msg']} ({exc.error_count()} error(s))"
        ) from exc


def _json_object(body: bytes | str) -> dict[str, object]:
    """The body as a JSON object: bounded size, UTF-8, no lone surrogates."""
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if len(raw) > MAX_BODY_BYTES:
        raise MalformedMessageError(
            f"message body is {len(raw)} bytes; at most {MAX_BODY_BYTES} accepted"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedMessageError(
            f"message body is not UTF-8: {exc.reason} at byte {exc.start}"
        ) from exc
    try:
        obj: object = json.loads(text)
    except RecursionError as exc:
        raise MalformedMessageError("message body is JSON nested too deeply") from exc
    except json.JSONDecodeError as exc:
        raise MalformedMessageError(
            f"message body is not JSON: {exc.msg} at char {exc.pos}"
        ) from exc
    if "\\u" in text:
        # A \ud800-style escape decodes to a lone surrogate, which no UTF-8
        # consumer downstream could re-encode.
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MalformedMessageError(
                "message body contains a lone UTF-16 surrogate escape"
            ) from exc
    if not isinstance(obj, dict):
        raise MalformedMessageError(f"message body must be a JSON object, got {type(obj).__name__}")
    return obj


def json_schemas() -> dict[str, dict[str, object]]:
    """JSON Schemas of every message, as published in docs/."""
    return {
        "add_partition": AddPartitionMessage.model_json_schema(by_alias=True),
        "drop_partition": DropPartitionMessage.model_json_schema(by_alias=True),
        "mark_set_done": SetDoneMessage.model_json_schema(by_alias=True),
        "partition_late": PartitionLateMessage.model_json_schema(by_alias=True),
        "partition_late_recovered": PartitionLateRecoveredMessage.model_json_schema(by_alias=True),
        "commits_missed": CommitsMissedMessage.model_json_schema(by_alias=True),
        "partition_withdrawn": PartitionWithdrawnMessage.model_json_schema(by_alias=True),
        "partition_done_retracted": PartitionDoneRetractedMessage.model_json_schema(
            by_alias=True),
    }
