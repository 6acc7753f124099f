"""The rows an append writes, and the one-event append as driver SQL."""

from __future__ import annotations

import json
import operator
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast, overload

from partition_notify.store.records import Clock, EventDraft, Logged
from partition_notify.store.schema import EventRow, SequenceRow, SetDoneRow
from sqlalchemy import JSON, Connection, Insert, Table

from partition_notify.contract import (
    AddPartitionMessage,
    AnyMessage,
    Envelope,
    SetDoneMessage,
    to_envelope,
)
from partition_notify.core.errors import CatalogChanged

#: A JSON column given beside its rows: each row's value, and its JSON text or None.
JsonColumn = tuple[Sequence[object], Sequence[str | None]]


class RowsView(Sequence[dict[str, Any]]):
    """Rows made as they are read (``make`` of each index in ``at``), not kept: a row
    kept per event was two dicts per partition for the whole append, and every
    collection-capable object made counts towards the garbage collector's next
    collections (with 10,000 partitions alive, full ones: a large share of
    announce_partitions' CPU)."""

    __slots__ = ("_at", "_make")

    def __init__(self, at: Sequence[int], make: Callable[[int], dict[str, Any]]) -> None:
        self._at, self._make = at, make

    def __len__(self) -> int:
        return len(self._at)

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            return [self._make(j) for j in self._at[i]]
        return self._make(self._at[i])  # IndexError past the end ends an iteration


@dataclass(slots=True)
class Rows:
    """The messages of an append and the rows it writes.

    ``events`` and ``parts`` hold every column but their JSON one (headers:
    the envelopes'; values: ``part_values``), given beside them (:meth:`json`),
    and are made from the drafts, messages and envelopes when read (RowsView).
    """

    now: float = 0.0
    published: bool = False
    messages: list[AnyMessage] = field(default_factory=list)
    envelopes: list[Envelope] = field(default_factory=list)
    #: Per event: its draft, id and topic sequence number.
    drafts: list[EventDraft] = field(default_factory=list)
    event_ids: list[int] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    #: The events (indices) whose partition row is new, and its values.
    new_parts: list[int] = field(default_factory=list)
    part_values: list[dict[str, str]] = field(default_factory=list)
    #: (table id, spec, new values) of partitions announced again (an overwrite).
    replaced: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    dones: list[dict[str, Any]] = field(default_factory=list)
    #: (table id, spec) of partitions dropped (DROP_PARTITION).
    dropped: list[tuple[int, str]] = field(default_factory=list)
    #: Per row of ``events`` / ``parts``: its headers' / values' JSON text when the
    #: draft made it (EventDraft), else None.
    headers_json: list[str | None] = field(default_factory=list)
    values_json: list[str | None] = field(default_factory=list)

    def logged(self) -> Logged:
        return Logged(self.messages, self.envelopes)

    @property
    def events(self) -> RowsView:
        """The pn_events rows (but their headers: :meth:`json`)."""
        return RowsView(range(len(self.messages)), self._event)

    @property
    def parts(self) -> RowsView:
        """The new pn_partitions rows (but their values: :meth:`json`)."""
        return RowsView(self.new_parts, self._part)

    def _event(self, i: int) -> dict[str, Any]:
        msg, d, now = self.messages[i], self.drafts[i], self.now
        return {"event_id": self.event_ids[i], "topic": d.table.topic,
                "topic_seq": self.seqs[i], "event_type": msg.event_type,
                "table_id": d.table.id, "message_id": msg.message_id,
                "body": self.envelopes[i].body.decode(), "created_at": now,
                # ``published``: the log itself is the bus.
                "published_at": now if self.published else None, "attempts": 0}

    def _part(self, i: int) -> dict[str, Any]:
        d = self.drafts[i]
        return {"table_id": d.table.id, "spec": d.partition_spec, "location": d.location,
                "revision": d.revision, "event_id": self.event_ids[i], "created_at": self.now}

    def json(self) -> tuple[dict[str, JsonColumn], dict[str, JsonColumn]]:
        """The JSON columns of ``events`` and of ``parts``, for :func:`insert_many`."""
        return ({"headers": ([e.headers for e in self.envelopes], self.headers_json)},
                {"values": (self.part_values, self.values_json)})

    @classmethod
    def of(
        cls,
        drafts: Sequence[EventDraft],
        first: int,
        seqs: dict[str, int],
        now: float,
        existing: dict[int, set[str]],
        published: bool,
    ) -> Rows:
        """Build each draft's message with its ids; ``seqs`` is advanced in place."""
        rows = cls(now, published)
        for offset, d in enumerate(drafts):
            event_id = first + offset
            seq = seqs[d.table.topic]
            seqs[d.table.topic] = seq + 1
            msg = d.message(event_id, seq, now)
            if (isinstance(msg, AddPartitionMessage)
                    and d.partition_spec in existing.get(d.table.id, ())):
                # Announced before: this one supersedes it (an overwrite), and says so.
                msg = msg.model_copy(update={"replace": True})
            rows.add(d, msg, (event_id, seq, now), existing, published)
        return rows

    def add(
        self,
        d: EventDraft,
        msg: AnyMessage,
        ids: tuple[int, int, float],
        existing: dict[int, set[str]],
        published: bool,
    ) -> None:
        event_id, seq, now = ids
        env = to_envelope(msg) if d.encode is None else d.encode(msg)
        self.messages.append(msg)
        self.envelopes.append(env)
        self.headers_json.append(None if d.headers_json is None else d.headers_json(env))
        self.drafts.append(d)
        self.event_ids.append(event_id)
        self.seqs.append(seq)
        spec, table_id = d.partition_spec, d.table.id
        if spec is None:
            pass
        elif d.drop:
            self.dropped.append((table_id, spec))
        elif spec in existing.get(table_id, ()):
            self.replaced.append((table_id, spec, {
                "values": d.partition_values, "location": d.location, "revision": d.revision,
                "event_id": event_id, "created_at": now}))
        else:  # its values beside the row (json())
            self.new_parts.append(len(self.messages) - 1)
            self.part_values.append(d.partition_values)
            self.values_json.append(d.values_json)
        if isinstance(msg, SetDoneMessage):
            self.dones.append(
                {
                    "table_id": d.table.id,
                    "spec": msg.spec,
                    "event_id": event_id,
                    "body": env.body.decode(),
                    "published_at": now,
                    "expires_at": now + d.table.retention_seconds,
                }
            )


_EVENT_COLUMNS = (
    "event_id", "topic", "topic_seq", "event_type", "table_id", "message_id", "headers",
    "body", "created_at", "published_at", "attempts",
)
_SET_DONE_COLUMNS = ("table_id", "spec", "event_id", "body", "published_at", "expires_at")


#: The counter every catalog write advances (store/catalog.py): a cached table is
#: current while the counter still has the value it was read with.
CATALOG_COUNTER = "catalog"


def check_catalog(draft: EventDraft, row: Sequence[object] | None) -> None:
    """Raise CatalogChanged unless the catalog counter read in the append's transaction
    (``row``; None: never advanced) is the one ``draft``'s table was cached at."""
    version = 0 if row is None else int(cast(int, row[0]))
    if version != draft.catalog_version:
        raise CatalogChanged(
            f"table {draft.table.qualified}: the catalog changed (version "
            f"{draft.catalog_version} -> {version}) since it was read; nothing was logged")


def insert_many(conn: Connection, stmt: Insert, rows: Sequence[Mapping[str, Any]],
                json_columns: Mapping[str, JsonColumn] | None = None) -> None:
    """``conn.execute(stmt, rows)``, ``json_columns`` (name -> each row's value and JSON
    text or None) added to each row; on SQLite one driver ``executemany``.

    announce_partitions of 10,000 partitions spent a tenth of its CPU in
    SQLAlchemy's per-row parameter processing (bench/durable_profile.py). The
    rows of one append share their keys; JSON values are serialised as the JSON
    type does on SQLite (``json.dumps``) unless their text is given.
    """
    given = json_columns or {}
    if not rows:
        return
    if conn.dialect.name != "sqlite":
        conn.execute(stmt, [{**r, **{c: v[n] for c, (v, _) in given.items()}}
                            for n, r in enumerate(rows)] if given else list(rows))
        return
    table = cast(Table, stmt.table)
    columns = list(rows[0])
    json_at = [i for i, c in enumerate(columns) if isinstance(table.c[c].type, JSON)]
    raw = conn.connection.driver_connection
    assert isinstance(raw, sqlite3.Connection), "a SQLite connection in a transaction"
    raw.executemany(_insert(table, [*columns, *given]),
                    _params(rows, columns, json_at, list(given.values())))


def _params(rows: Sequence[Mapping[str, Any]], columns: list[str], json_at: list[int],
            given: list[JsonColumn]) -> Iterator[Sequence[object]]:
    """Each row's parameters, made as executemany takes them: a list of 10,000 rows'
    parameter lists kept alive was walked by every garbage collection meanwhile, and
    its allocations brought the next collections sooner."""
    values = operator.itemgetter(*columns)  # one C call per row, in column order
    one = len(columns) == 1  # then it returns the value, not a tuple
    for n, r in enumerate(rows):
        row = [values(r)] if one else list(values(r))
        for i in json_at:
            row[i] = json.dumps(row[i])
        for objects, texts in given:
            row.append(texts[n] or json.dumps(objects[n]))
        yield row


def _insert(table: Table, columns: Sequence[str]) -> str:
    # Quoted: pn_partitions has a column named "values", an SQL keyword.
    quoted = ", ".join('"' + c + '"' for c in columns)
    return f"INSERT INTO {table.name} ({quoted}) VALUES ({', '.join('?' * len(columns))})"


class DriverAppend:
    """One event appended with prebuilt SQLite statements on the driver's cursor.

    The publish hot path: executing the Core statements cost more CPU than
    the rest of an append after its commit (bench/durable_publish.py). The
    statements, their order and their locks are the Core path's: reserve
    the event id, then the topic's sequence number, then insert. JSON is
    serialised as SQLAlchemy's JSON type does on SQLite (``json.dumps``).
    """

    def __init__(self) -> None:
        seq = cast(Table, SequenceRow.__table__)
        # Both counters advanced by one statement; on SQLite the writer holds the
        # database's write lock already, so their order does not matter. Then one read
        # of both and of the catalog counter, in the same transaction, under the same
        # lock. Not ``UPDATE .. RETURNING``: between a publish's disk and broker waits
        # it cost ~11 us more CPU than these two statements (bench/durable_profile.py).
        self._advance = (f"UPDATE {seq.name} SET next_value = next_value + 1 "
                         "WHERE name IN ('event', ?)")
        self._read = (f"SELECT name, next_value FROM {seq.name} "
                      f"WHERE name IN ('event', ?, '{CATALOG_COUNTER}')")
        self._new_counter = f"INSERT INTO {seq.name} (name, next_value) VALUES (?, 2)"
        self._event = _insert(cast(Table, EventRow.__table__), _EVENT_COLUMNS)
        self._set_done = _insert(cast(Table, SetDoneRow.__table__), _SET_DONE_COLUMNS)

    def run(self, raw: sqlite3.Connection, draft: EventDraft, clock: Clock,
            published: bool) -> Logged:
        """Append ``draft`` (no partition row: :meth:`EventLog.append`'s one-event case)
        in ``raw``'s open write transaction (the caller commits); its message and envelope.

        The rows :meth:`Rows.add` makes for such a draft, as statement parameters
        directly: the dicts in between were a tenth of an append's Python.
        """
        assert draft.partition_spec is None, "partition drafts take the general path"
        cur = raw.cursor()
        try:
            first, seq = self._take_two(cur, draft)
            now = clock()
            msg = draft.message(first, seq, now)
            env = to_envelope(msg) if draft.encode is None else draft.encode(msg)
            body = env.body.decode()
            headers = None if draft.headers_json is None else draft.headers_json(env)
            table = draft.table
            cur.execute(self._event, (
                first, table.topic, seq, msg.event_type, table.id, msg.message_id,
                headers or json.dumps(env.headers), body, now,
                now if published else None,  # ``published``: the log itself is the bus
                0))
            if isinstance(msg, SetDoneMessage):
                cur.execute(self._set_done, (table.id, msg.spec, first, body, now,
                                             now + table.retention_seconds))
        finally:
            cur.close()
        return Logged([msg], [env])

    def _take_two(self, cur: sqlite3.Cursor, draft: EventDraft) -> tuple[int, int]:
        """The next event id and the topic's next sequence number, a counter's first use
        starting it at 1; refuses a draft built from an older catalog (check_catalog)."""
        topic_counter = f"topic:{draft.table.topic}"
        cur.execute(self._advance, (topic_counter,))
        cur.execute(self._read, (topic_counter,))
        values: dict[str, int] = dict(cur.fetchall())  # name TEXT, next_value INTEGER
        if draft.catalog_version is not None:
            catalog = values.get(CATALOG_COUNTER)
            check_catalog(draft, None if catalog is None else (catalog,))
        event, seq = values.get("event"), values.get(topic_counter)
        if event is not None and seq is not None:  # every publish but a counter's first
            return event - 1, seq - 1
        taken: dict[str, int] = {}
        for name in ("event", topic_counter):
            if name in values:
                taken[name] = values[name] - 1
            else:
                cur.execute(self._new_counter, (name,))
                taken[name] = 1
        return taken["event"], taken[topic_counter]
