"""Retention: the set-done history, its look-up and the purge of expired rows."""

from __future__ import annotations

from collections.abc import Sequence

from partition_notify.store.hot_read import HotReader
from partition_notify.store.housekeeping import BetweenBatches, in_batches
from partition_notify.store.records import TableInfo
from partition_notify.store.repositories import covering_sql
from partition_notify.store.retained_check import Row, RowCheck
from partition_notify.store.schema import SetDoneRow
from partition_notify.store.uow import Access, map_db_error
from sqlalchemy.exc import SQLAlchemyError

#: Table ids per history read: within every driver's bound-parameter limit.
IDS_PER_READ = 900
_HISTORY_SQL = (
    f"SELECT event_id, body, id, table_id, spec FROM {SetDoneRow.__tablename__} "
    "WHERE table_id IN ({ids}) "
    "AND published_at >= {p} AND expires_at > {p}"
)


class Retention:
    """Set-done rows kept for each table's retention; each method is one unit of work."""

    def __init__(self, access: Access, hot: HotReader) -> None:
        self._db = access
        self.clock = access.clock
        # The covering look-up's SQL by number of candidate specs, sent as is:
        # compiling the expanding IN on every call was most of its CPU.
        self._covering_sql: dict[tuple[int, bool], str] = {}
        self._placeholder = "?" if access.engine.dialect.paramstyle == "qmark" else "%s"
        self._hot = hot
        #: Skips (and logs once) a damaged row: every reader of this store shares it.
        self.check = RowCheck()

    def set_done_covering(self, table: TableInfo, specs: Sequence[str]) -> list[str]:
        """Unexpired set-done bodies of ``table`` whose canonical spec is in ``specs``.

        Oldest first: the deadline checker judges the FIRST completion. A
        waiter wants :meth:`newest_covering` instead. Damaged rows are skipped
        (store/retained_check.py).
        """
        return [r[0] for r in self.check.valid(table, specs, self._covering(table, specs))]

    def newest_covering(self, table: TableInfo, specs: Sequence[str]) -> str | None:
        """The body of the most recent valid unexpired covering set-done, or None.

        What every waiter answers: a set done again (a backfill, a re-run at a
        newer revision) carries the revision downstream jobs must read at; the
        first one would send them to stale data. A damaged newest row is
        skipped for the next-newest valid one.
        """
        newest = self._covering(table, specs, newest=True)
        if not newest or self.check.ok(table, specs, newest[0]):
            return newest[0][0] if newest else None
        # Rare: read every covering row (bounded by the table's retention).
        for row in reversed(self._covering(table, specs)):
            if self.check.ok(table, specs, row):
                return row[0]
        return None

    def _covering(self, table: TableInfo, specs: Sequence[str], *,
                  newest: bool = False) -> list[Row]:
        """The hot read of every wait: a kept raw driver connection
        (store/hot_read.py), not a pool checkout or an ORM session, which were
        most of its time (bench/core_lookup.py --profile).
        """
        if not specs:
            return []
        key = (len(specs), newest)
        sql = self._covering_sql.get(key)
        if sql is None:
            sql = self._covering_sql[key] = covering_sql(len(specs), self._placeholder,
                                                          newest=newest)
        params = (table.id, *specs, self.clock())
        found = self._hot.rows(sql, params)
        if found is not None:
            return [(r[0], int(r[1]), int(r[2])) for r in found]
        try:  # every kept connection is busy
            with self._db.reader.connect() as conn:
                return [(r[0], int(r[1]), int(r[2])) for r in conn.exec_driver_sql(sql, params)]
        except SQLAlchemyError as exc:
            raise map_db_error(exc) from exc

    def set_done_history(self, tables: Sequence[TableInfo], since: float) -> list[str]:
        """Unexpired set-done bodies of ``tables`` published at or after ``since``.

        Ids go in chunks as plain driver SQL on one connection, merged in event
        order: one ORM statement with 100,000 bound ids spent most of a large
        subscribe compiling the IN list (bench/many_tables.py). Damaged rows are
        skipped (store/retained_check.py).
        """
        by_id = {t.id: t for t in tables}
        ids = sorted(by_id)
        now = self.clock()
        rows: list[tuple[int, str, int, int, str]] = []
        try:
            with self._db.reader.connect() as conn:
                for i in range(0, len(ids), IDS_PER_READ):
                    chunk = ids[i : i + IDS_PER_READ]
                    marks = ", ".join([self._placeholder] * len(chunk))
                    sql = _HISTORY_SQL.format(ids=marks, p=self._placeholder)
                    rows.extend((int(r[0]), str(r[1]), int(r[2]), int(r[3]), str(r[4]))
                                for r in conn.exec_driver_sql(sql, (*chunk, since, now)))
        except SQLAlchemyError as exc:
            raise map_db_error(exc) from exc
        rows.sort()
        return [body for event_id, body, row_id, table_id, spec in rows
                if self.check.ok(by_id[table_id], (spec,), (body, row_id, event_id))]

    def set_done_page(self, table: TableInfo, since: float, after_event_id: int,
                      limit: int) -> tuple[list[str], int | None]:
        """One page of :meth:`set_done_history` for one table: the first ``limit``
        unexpired rows after ``after_event_id``, and the event id to go on from
        (None at the end). The database keeps only ``limit`` rows in its sort; a
        damaged row is skipped, but it still moves the cursor."""
        p = self._placeholder
        sql = (_HISTORY_SQL.format(ids=p, p=p) + f" AND event_id > {p} "
               f"ORDER BY event_id LIMIT {p}")
        try:
            with self._db.reader.connect() as conn:
                rows = [(int(r[0]), str(r[1]), int(r[2]), str(r[4])) for r in
                        conn.exec_driver_sql(sql, (table.id, since, self.clock(),
                                                   after_event_id, limit))]
        except SQLAlchemyError as exc:
            raise map_db_error(exc) from exc
        bodies = [body for event_id, body, row_id, spec in rows
                  if self.check.ok(table, (spec,), (body, row_id, event_id))]
        return bodies, (rows[-1][0] if len(rows) == limit else None)

    def purge_expired(
        self,
        *,
        batch_size: int = 5000,
        max_batches: int | None = None,
        between_batches: BetweenBatches | None = None,
    ) -> int:
        """Delete expired set-done rows, one short transaction per batch.

        Small batches keep each write lock short so publishers are never held
        up behind one giant delete; rows not yet expired are never touched.
        """
        return in_batches(
            lambda: self._db.uow(write=True),
            lambda uow, n: uow.set_done.purge_batch(self.clock(), n),
            batch_size=batch_size, max_batches=max_batches, between_batches=between_batches)
