"""Move several cursors past one event in one durable transaction: a watcher's hand-over.

Why a path of its own: an AssetWatcher's trigger fires only after its cursor has
moved past the set-done, so this write sits on the commit -> DAG-run path.
Measured inside Airflow's triggerer (docs/benchmarks.md, "Pass 5"), the unit of
work cost 2-4 ms of CPU per write and the hops to a worker thread and back
3-11 ms. :class:`CursorTaker` is called on the log follower's own thread
(integrations/follow.py) before it hands the event over, so no hop is added,
and every watcher of that event in the process moves in the same transaction
(one commit, not one per watcher). On SQLite the statements run on a
connection of their own, begun and committed on the driver as the log's appends
are (store/sqlite_writer.py); on other databases in one unit of work. Either
way the commit has the store's durability (``synchronous`` as the engine's
connect hook set it), and each name is a compare-and-set: a cursor already at
or past the event is not moved and its watcher gets ``False``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from partition_notify.store.cursor_schema import CursorRow
from partition_notify.store.provider import Store
from partition_notify.store.sqlite_writer import SQLiteWriter
from partition_notify.store.uow import UnitOfWork, affected_rows, map_driver_error
from sqlalchemy import update

_TAKE_SQL = (
    "UPDATE pn_consumer_cursors SET event_id = ?, pending_event_id = NULL, "
    "pending_since = NULL, updated_at = ? WHERE name = ? AND event_id < ?"
)


class CursorTaker:
    """Compare-and-set moves of named cursors; one caller thread at a time (the follower's)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        sqlite = store.engine.dialect.name == "sqlite"
        self._writer = SQLiteWriter(store.engine) if sqlite else None

    def take(self, names: Sequence[str], event_id: int) -> list[bool]:
        """Move each of ``names`` to ``event_id`` if it is still before it, durably,
        in one transaction; per name, False when it was not (already taken, by an
        earlier life of its watcher, a twin, or a name listed twice). Raises
        :class:`~partition_notify.core.errors.StoreError` and moves none on failure."""
        if not names:
            return []
        now = self.store.clock()
        if self._writer is None:
            return self._take_in_uow(names, event_id, now)
        try:
            with self._writer.transaction() as conn:
                return [conn.execute(_TAKE_SQL, (event_id, now, name, event_id)).rowcount == 1
                        for name in names]
        except sqlite3.Error as exc:
            raise map_driver_error(exc) from exc

    def _take_in_uow(self, names: Sequence[str], event_id: int, now: float) -> list[bool]:
        with UnitOfWork(self.store.engine, write=True) as uow:
            return [affected_rows(uow.session.execute(
                update(CursorRow)
                .where(CursorRow.name == name, CursorRow.event_id < event_id)
                .values(event_id=event_id, pending_event_id=None, pending_since=None,
                        updated_at=now))) == 1 for name in names]

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
