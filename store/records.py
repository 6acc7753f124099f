"""What the store's parts hand out and take in: plain records, no sessions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from partition_notify.store.schema import TableRow
from sqlalchemy import Row

from partition_notify.contract import AnyMessage, Envelope

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class TableInfo:
    id: int
    db: str
    name: str
    partition_keys: tuple[str, ...]
    topic: str
    retention_seconds: int
    location: str | None = None
    topic_override: str | None = None

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"

    @classmethod
    def of(cls, row: TableRow | Row[Any]) -> TableInfo:
        return cls(
            row.id,
            row.db,
            row.name,
            tuple(row.partition_keys),
            row.topic,
            row.retention_seconds,
            row.location,
            row.topic_override,
        )


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    spec: str
    values: dict[str, str]
    location: str | None
    revision: int | None
    event_id: int
    created_at: float


@dataclass(slots=True)
class EventDraft:
    """An event to append; ``build`` makes the message once ids are allocated (None:
    a subclass's :meth:`message` makes it)."""

    table: TableInfo
    build: Callable[[int, int, float], AnyMessage] | None
    partition_spec: str | None = None
    partition_values: dict[str, str] = field(default_factory=dict)
    location: str | None = None
    revision: int | None = None
    #: A DROP_PARTITION: removes the partition (logged only if it is present).
    drop: bool = False
    #: A PARTITION_WITHDRAWN of this (partial) spec: store/withdrawals.py fills
    #: ``withdrawn`` inside the append, before ``build`` runs.
    withdraw: dict[str, str] | None = None
    withdrawn: Withdrawn | None = None
    #: The catalog version ``table`` was read at when it came from the cache
    #: (store/catalog.py): the append checks it in its transaction. None: read fresh.
    catalog_version: int | None = None
    #: The message's envelope, when the drafter encodes faster than ``to_envelope``
    #: (publisher/templates.py); None: ``to_envelope``.
    encode: Callable[[AnyMessage], Envelope] | None = None
    #: The JSON text of the partition values and of an envelope's headers exactly as
    #: ``json.dumps`` writes them, when the drafter makes them faster (publisher/
    #: templates.py); None: the SQLite append serialises them (store/append_rows.py).
    values_json: str | None = None
    headers_json: Callable[[Envelope], str | None] | None = None

    def message(self, event_id: int, seq: int, now: float) -> AnyMessage:
        """The message with its ids, as the append logs it."""
        assert self.build is not None, "a draft without build makes its message itself"
        return self.build(event_id, seq, now)


@dataclass(frozen=True, slots=True)
class Withdrawn:
    """What a withdrawal removed: partitions (key-ordered values), set-dones (spec, id)."""

    partitions: list[dict[str, str]]
    set_dones: list[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    event_id: int
    topic: str
    topic_seq: int
    body: str
    headers: dict[str, str]
    #: Why the row cannot be verified, "" when it can: its headers AND body are damaged
    #: (store/log_headers.py). A relay dead-letters such an event instead of sending it.
    unverifiable: str = ""


class Logged(list[AnyMessage]):
    """The messages an append logged, in event-id order, and the envelopes it encoded
    for the log: the publisher sends those, so each message is encoded once."""

    __slots__ = ("envelopes",)

    def __init__(self, messages: list[AnyMessage], envelopes: list[Envelope]) -> None:
        super().__init__(messages)
        self.envelopes = envelopes
