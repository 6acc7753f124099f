"""Retained set-done rows are checked before anyone answers from them.

A row is written once by the publisher, but it can be read years of releases
later, or come back damaged (a restore, a hand edit, an older version's body):
a body that no longer decodes, or that names another table or spec than its
row, must not decide a waiter's answer (HTTP answered 500 or the wrong
set-done, ``expect wait`` raised). The readers skip such a row and answer
from the next valid one; the row is logged once, with its id, so an operator
can find and delete it.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Collection

from partition_notify.store.records import TableInfo

from partition_notify.contract import SetDoneMessage, decode, spec
from partition_notify.core.errors import MalformedMessageError, PartitionNotifyError

log = logging.getLogger("partition_notify.store.retention")

#: Row ids remembered, damaged (logged once) and valid (decoded once) each;
#: beyond it the oldest is forgotten (and checked again if still read).
MAX_REMEMBERED = 10_000

#: A retained row as the readers select it: body, row id, event id.
Row = tuple[str, int, int]


def problem(table: TableInfo, row: Row) -> tuple[str, str | None]:
    """``row``'s canonical spec, and why it cannot answer for ``table`` (None: it can)."""
    body, _, event_id = row
    try:
        msg = decode(str(body))
    except MalformedMessageError as exc:
        return "", str(exc)
    if not isinstance(msg, SetDoneMessage):
        return "", f"it holds a {msg.event_type} message, not a set-done"
    if (msg.db, msg.table) != (table.db, table.name):
        return "", f"its message is of table {msg.db}.{msg.table}"
    try:
        canon = spec.canonical(msg.partition_spec)
    except PartitionNotifyError as exc:
        return "", f"its partitionSpec does not parse: {exc}"
    if canon != msg.spec:
        return "", f"its partitionSpec is {canon!r} but its partitionSpecString {msg.spec!r}"
    if msg.event_id != event_id:
        return "", f"its message's eventId {msg.event_id} is not the row's"
    return canon, None


class RowCheck:
    """Keeps the valid rows; logs each damaged one once. Thread-safe.

    Decoding a body costs ~30 us, a third of the whole SQLite look-up
    (docs/benchmarks.md): a row found valid is remembered by id and body hash
    (a row edited later is checked again), bounded like the damaged ones.
    """

    def __init__(self) -> None:
        self._logged: OrderedDict[int, None] = OrderedDict()
        self._valid: dict[tuple[int, int, int], str] = {}
        self._lock = threading.Lock()
        #: Damaged rows skipped, every read counted.
        self.skipped = 0

    def valid(self, table: TableInfo, specs: Collection[str] | None, rows: list[Row]) -> list[Row]:
        return [r for r in rows if self.ok(table, specs, r)]

    def ok(self, table: TableInfo, specs: Collection[str] | None, row: Row) -> bool:
        """Whether ``row`` may answer for ``table`` and a spec in ``specs`` (None: any)."""
        key = (row[1], table.id, hash(row[0]))
        canon = self._valid.get(key)
        why: str | None = None
        if canon is None:
            canon, why = problem(table, row)
            if why is None:
                with self._lock:
                    if len(self._valid) >= MAX_REMEMBERED:
                        del self._valid[next(iter(self._valid))]
                    self._valid[key] = canon
        if why is None and (specs is None or canon in specs):
            return True
        self._skip(table, row, why or f"its message's spec {canon!r} is not the row's")
        return False

    def _skip(self, table: TableInfo, row: Row, why: str) -> None:
        with self._lock:
            self.skipped += 1
            if row[1] in self._logged:
                return
            self._logged[row[1]] = None
            if len(self._logged) > MAX_REMEMBERED:
                self._logged.popitem(last=False)
        log.warning(
            "skipping retained set-done row %d (event %d) of %s: %s; readers answer from "
            "the other rows (delete it: DELETE FROM pn_set_done WHERE id = %d)",
            row[1], row[2], table.qualified, why, row[1])
