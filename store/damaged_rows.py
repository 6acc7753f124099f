"""Rows of the event log whose ``headers`` are damaged, for the people on call.

The readers rebuild such headers from the body, or skip an unverifiable row
(store/log_headers.py), and say so once per process at ERROR; this lists them
from the database itself, so ``/ui/ops`` and ``partition-notify dead-letters
damaged`` show them to whoever looks, after any restart. Bounded twice: only
the newest ``scan`` events are looked at (an event-id range, the primary key:
the work does not grow with the log), and at most ``limit`` rows are returned,
newest first. Nothing is logged or counted here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from partition_notify.store.log_headers import diagnose
from partition_notify.store.provider import Store
from partition_notify.store.uow import UnitOfWork
from sqlalchemy import text

#: What the ops page and the CLI look at by default: the newest events of the log.
SCAN_EVENTS = 100_000

#: Headers that are not a JSON object. SQLite: text, perhaps not JSON at all
#: (json_type raises on that, hence the CASE); PostgreSQL: a json column.
_DAMAGED = {
    "sqlite": "CASE WHEN json_valid(e.headers) THEN json_type(e.headers) <> 'object' "
              "ELSE 1 END",
    "postgresql": "e.headers IS NULL OR json_typeof(e.headers) <> 'object'",
}
_SQL = ("SELECT e.event_id, e.topic, e.topic_seq, e.body, {raw} AS headers, e.dead_at, "
        "t.db, t.name FROM pn_events e JOIN pn_tables t ON t.id = e.table_id "
        "WHERE e.event_id > :low AND ({damaged}) ORDER BY e.event_id DESC LIMIT :limit")


@dataclass(frozen=True, slots=True)
class DamagedRow:
    event_id: int
    table: str
    topic: str
    topic_seq: int
    #: What is wrong: the field and what was expected.
    problem: str
    #: Why it cannot be verified (its body does not decode either): never sent; "" if not.
    unverifiable: str
    dead_lettered: bool

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class DamagedScan:
    rows: list[DamagedRow]
    #: The event ids looked at: ``first..last`` (none when the log is empty).
    first: int
    last: int


def find_damaged(store: Store, limit: int, scan: int = SCAN_EVENTS) -> DamagedScan:
    """The damaged rows among the newest ``scan`` events (``0``: the whole log, which
    reads every row), newest first, at most ``limit``."""
    engine = store.engine
    raw = "e.headers" if engine.dialect.name == "sqlite" else "e.headers::text"
    sql = text(_SQL.format(raw=raw, damaged=_DAMAGED[engine.dialect.name]))
    with UnitOfWork(engine, write=False) as uow:
        last = uow.events.max_id()
        low = max(0, last - scan) if scan > 0 else 0
        found = uow.session.execute(sql, {"low": low, "limit": limit}).all()
    rows = []
    for r in found:
        what = diagnose(r.event_id, r.topic, r.body, r.headers)
        if what is not None:  # the SQL and the readers agree; a repair may have raced
            rows.append(DamagedRow(r.event_id, f"{r.db}.{r.name}", r.topic, r.topic_seq,
                                   *what, r.dead_at is not None))
    return DamagedScan(rows, low + 1, last)
