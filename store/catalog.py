"""The catalog: registered tables and the partitions announced for them."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import cast

from partition_notify.store.append_rows import CATALOG_COUNTER
from partition_notify.store.records import PartitionInfo, TableInfo
from partition_notify.store.repositories import TABLE_INFO_BY_NAME
from partition_notify.store.schema import PartitionRow, SetDoneRow, TableRow
from partition_notify.store.uow import Access, DriverRow, UnitOfWork
from sqlalchemy import Table, bindparam, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from partition_notify.core.errors import ConflictError, UnknownTableError

#: Names per query of :meth:`Catalog.get_tables`: within every driver's bound-parameter
#: limit (SQLite builds from 999 up, PostgreSQL 65,535), few round trips for 100,000.
NAMES_PER_READ = 900
#: Tries of a registration that lost a race with a concurrent one: the second finds
#: the row; a third covers the first catalog counter racing too.
REGISTER_ATTEMPTS = 3
#: Tables :meth:`Catalog.cached_table` keeps at most (cleared when full).
CACHED_TABLES = 4096
_TABLES_T = cast(Table, TableRow.__table__)
#: Many tables' rows by name (subscribing to many): the dbs asked, names in chunks.
_TABLE_INFOS_BY_NAMES = select(*_TABLES_T.c).where(
    _TABLES_T.c.db.in_(bindparam("dbs", expanding=True)),
    _TABLES_T.c.name.in_(bindparam("names", expanding=True)),
)
#: Tables by id (serve's jobs read the tables their rules and expectations name).
_TABLE_INFOS_BY_IDS = select(*_TABLES_T.c).where(
    _TABLES_T.c.id.in_(bindparam("ids", expanding=True)))
_TABLE_INFOS_WITH_LOCATION = select(*_TABLES_T.c).where(
    _TABLES_T.c.location.is_not(None)).order_by(_TABLES_T.c.db, _TABLES_T.c.name)
_LONGEST_RETENTION = select(func.max(_TABLES_T.c.retention_seconds))
_TABLE_COLUMNS = (
    "id", "db", "name", "partition_keys", "topic", "retention_seconds", "location",
    "topic_override",
)


@functools.lru_cache(maxsize=256)
def _keys(text: str) -> tuple[str, ...]:
    """Partition keys from their JSON: tables mostly share a few key lists, parsed once."""
    return tuple(json.loads(text))
_LOCATED_SQL = (f"SELECT {', '.join(_TABLE_COLUMNS)} FROM {_TABLES_T.name} "
                "WHERE location IS NOT NULL ORDER BY db, name")


def _driver_table_info(row: DriverRow) -> TableInfo:
    """TableInfo from a driver row of _TABLE_COLUMNS (JSON as SQLAlchemy stores it on SQLite)."""
    tid, db, name, keys, topic, retention, location, override = row
    assert isinstance(tid, int) and isinstance(retention, int), row
    return TableInfo(
        tid,
        str(db),
        str(name),
        _keys(str(keys)),
        str(topic),
        retention,
        None if location is None else str(location),
        None if override is None else str(override),
    )


def _usage(session: Session, table_id: int) -> tuple[int, int]:
    """(announced partitions, retained set-done rows) of a table."""
    count = func.count()
    return (
        session.scalar(select(count).where(PartitionRow.table_id == table_id)) or 0,
        session.scalar(select(count).where(SetDoneRow.table_id == table_id)) or 0,
    )


def _partition_info(row: PartitionRow) -> PartitionInfo:
    return PartitionInfo(
        row.spec, dict(row.values), row.location, row.revision, row.event_id, row.created_at
    )


class Catalog:
    """Tables and partitions; each method is one unit of work."""

    def __init__(self, access: Access) -> None:
        self._db = access
        t = cast(Table, TableRow.__table__)
        # Every publish reads its table: on SQLite as driver SQL (see Access.read_driver).
        sqlite = access.engine.dialect.name == "sqlite"
        self._table_sql = (
            f"SELECT {', '.join(_TABLE_COLUMNS)} FROM {t.name} WHERE db = ? AND name = ?"
            if sqlite else None
        )
        # One statement, one snapshot: the row and the counter it is current at.
        self._versioned_sql = (
            f"SELECT {', '.join(_TABLE_COLUMNS)}, (SELECT next_value FROM pn_sequence "
            f"WHERE name = '{CATALOG_COUNTER}') FROM {t.name} WHERE db = ? AND name = ?"
            if sqlite else None
        )
        self._cache: dict[tuple[str, str], tuple[TableInfo, int]] = {}

    def register_table(
        self,
        db: str,
        name: str,
        keys: Sequence[str],
        *,
        topic: str,
        retention_seconds: int,
        topic_override: str | None = None,
        location: str | None = None,
        update_retention: bool = False,
        change_existing: bool = True,
    ) -> tuple[TableInfo, bool]:
        """Register a table; returns (info, created): of concurrent registrations of a
        new table, one created it.

        Re-registering an existing table applies a given ``location`` and, with
        ``update_retention``, the retention; different keys or topic conflict.
        Without ``change_existing`` an existing table is returned as stored,
        unchecked and unchanged: the caller compares (HTTP's 409 names the field).
        """
        once = functools.partial(
            self._register_once, db, name, keys, topic=topic,
            retention_seconds=retention_seconds, topic_override=topic_override,
            location=location, update_retention=update_retention,
            change_existing=change_existing)
        for attempt in range(1, REGISTER_ATTEMPTS + 1):
            try:
                return once()
            except ConflictError as exc:
                # A concurrent registration inserted the row (or the first catalog
                # counter) after our look-up found none: PostgreSQL's look-up does not
                # wait for it. The next attempt finds the row. Our own conflicts
                # (other keys or topic) have no driver error behind them.
                if not isinstance(exc.__cause__, IntegrityError) or attempt == REGISTER_ATTEMPTS:
                    raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _register_once(
        self, db: str, name: str, keys: Sequence[str], *, topic: str, retention_seconds: int,
        topic_override: str | None, location: str | None, update_retention: bool,
        change_existing: bool,
    ) -> tuple[TableInfo, bool]:
        with self._write() as uow:
            row = uow.tables.get(db, name)
            if row is not None:
                info = TableInfo.of(row)
                if not change_existing:
                    return info, False
                if info.partition_keys != tuple(keys):
                    raise ConflictError(
                        f"table {db}.{name} is registered with partition keys "
                        f"{list(info.partition_keys)}, not {list(keys)}"
                    )
                if topic_override and topic_override != info.topic:
                    raise ConflictError(
                        f"table {db}.{name} is registered on topic {info.topic!r}, "
                        f"not {topic_override!r}"
                    )
                if update_retention:
                    row.retention_seconds = retention_seconds
                if location is not None:
                    row.location = location
                return TableInfo.of(row), False
            uow.sequences.take(CATALOG_COUNTER, 1)  # add() flushes: _write would not see it
            row = uow.tables.add(
                TableRow(
                    db=db,
                    name=name,
                    partition_keys=list(keys),
                    topic=topic,
                    topic_override=topic_override,
                    retention_seconds=retention_seconds,
                    location=location,
                    created_at=self._db.clock(),
                )
            )
            return TableInfo.of(row), True

    def alter_table(
        self,
        db: str,
        name: str,
        *,
        keys: Sequence[str] | None = None,
        topic: tuple[str, str | None] | None = None,
        location: str | None = None,
        retention_seconds: int | None = None,
    ) -> TableInfo:
        """Change what is given; ``topic`` is (topic, override). One unit of work.

        Keys change only while nothing was announced or marked done for the
        table: retained rows and subscribers' specs are written in the old keys.
        """
        with self._write() as uow:
            row = uow.tables.get(db, name)
            if row is None:
                raise UnknownTableError(f"table {db}.{name} is not registered")
            if keys is not None and list(keys) != list(row.partition_keys):
                used = _usage(uow.session, row.id)
                if any(used):
                    raise ConflictError(
                        f"keys of table {db}.{name} cannot change from "
                        f"{list(row.partition_keys)} to {list(keys)}: it has {used[0]} "
                        f"announced partition(s) and {used[1]} retained set-done row(s) "
                        "(unregister it and register it again)")
                row.partition_keys = list(keys)
            if topic is not None:
                row.topic, row.topic_override = topic
            if location is not None:
                row.location = location or None  # "" clears it
            if retention_seconds is not None:
                row.retention_seconds = retention_seconds
            return TableInfo.of(row)

    def unregister_table(self, db: str, name: str) -> tuple[TableInfo, int, int]:
        """Remove a table with its partitions and retained set-done rows (cascade).

        Returns (the table as it was, partitions removed, set-done rows removed).
        The event log keeps what was logged (the relay still delivers it;
        housekeeping purges it with the rest).
        """
        with self._write(changes=True) as uow:
            row = uow.tables.get(db, name)
            if row is None:
                raise UnknownTableError(f"table {db}.{name} is not registered")
            info = TableInfo.of(row)
            partitions, set_done = _usage(uow.session, row.id)
            uow.session.delete(row)
            uow.session.flush()
            return info, partitions, set_done

    def set_retention(self, db: str, name: str, seconds: int) -> TableInfo:
        with self._write() as uow:
            row = uow.tables.get(db, name)
            if row is None:
                raise UnknownTableError(f"table {db}.{name} is not registered")
            row.retention_seconds = seconds
            return TableInfo.of(row)

    @contextmanager
    def _write(self, *, changes: bool = False) -> Iterator[UnitOfWork]:
        """A unit of work on the catalog. If it changed a table (``changes``: it
        deleted one) it advances the catalog counter, so every cached read of a
        table, in any process, is refused by the next append (the append reads
        the counter in its own transaction). An identical re-registration
        changes nothing, counter included."""
        self._cache.clear()
        try:
            with self._db.uow(write=True) as uow:
                yield uow
                s = uow.session
                if changes or s.new or s.deleted or any(s.is_modified(o) for o in s.dirty):
                    uow.sequences.take(CATALOG_COUNTER, 1)
        finally:
            self._cache.clear()  # a read racing the write may have cached the old row

    def cached_table(self, db: str, name: str) -> tuple[TableInfo, int | None, bool]:
        """The table, the catalog version it was read at and whether it came from the
        cache (SQLite only).

        The version goes into the draft (``EventDraft.catalog_version``); the
        append checks it under the write lock and raises CatalogChanged if any
        catalog write (this process's or another's) came in between. The read a
        publish started with was most of its CPU outside the commit
        (bench/durable_profile.py). On PostgreSQL: a fresh read, version None.
        """
        hit = self._cache.get((db, name))
        if hit is not None:
            return hit[0], hit[1], True
        if self._versioned_sql is None:
            return self.get_table(db, name), None, False
        found = self._db.read_driver(self._versioned_sql, (db, name))
        if not found:
            return self.get_table(db, name), None, False  # its error
        version = found[0][-1]
        entry = _driver_table_info(found[0][:-1]), 0 if version is None else int(version)
        if len(self._cache) >= CACHED_TABLES:
            self._cache.clear()  # bounded; the hot tables come back at once
        self._cache[db, name] = entry
        return entry[0], entry[1], False

    def forget(self, db: str, name: str) -> None:
        """Drop ``db.name`` from the cache (an append found it stale)."""
        self._cache.pop((db, name), None)

    def get_table(self, db: str, name: str) -> TableInfo:
        # Every publish starts here: a plain connection and a prebuilt
        # statement, not a unit of work (bench/core_latency.py).
        if self._table_sql is not None:
            found = self._db.read_driver(self._table_sql, (db, name))
            info = _driver_table_info(found[0]) if found else None
        else:
            rows = self._db.read(TABLE_INFO_BY_NAME, {"db": db, "name": name})
            info = TableInfo.of(rows[0]) if rows else None
        if info is None:
            raise UnknownTableError(
                f"table {db}.{name} is not registered (register it first: "
                f"partition-notify register {db}.{name} --keys ...)"
            )
        return info

    def get_tables(self, refs: Sequence[tuple[str, str]]) -> list[TableInfo]:
        """Many tables, in the order asked; any unknown one is an error.

        Reads only the rows asked for, as plain rows (no ORM objects), a chunk of
        names per query: subscribing to 100,000 tables spent most of its time
        building ORM objects for the whole catalog (bench/many_tables.py).
        """
        found = self.find_tables(refs)
        missing = [f"{db}.{name}" for db, name in refs if (db, name) not in found]
        if missing:
            more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
            raise UnknownTableError(
                f"table(s) {', '.join(missing[:5])}{more} not registered (register first: "
                f"partition-notify register {missing[0]} --keys ...)")
        return [found[ref] for ref in refs]

    def find_tables(self, refs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], TableInfo]:
        """The registered ones of ``refs`` by ``(db, name)``; unknown ones are left out."""
        wanted = set(refs)
        dbs = sorted({db for db, _ in wanted})
        names = sorted({name for _, name in wanted})
        found: dict[tuple[str, str], TableInfo] = {}
        step = max(1, NAMES_PER_READ - len(dbs))
        for i in range(0, len(names), step):
            for info in self._tables_named(dbs, names[i : i + step]):
                if (info.db, info.name) in wanted:
                    found[info.db, info.name] = info
        return found

    def tables_by_id(self, ids: Iterable[int]) -> dict[int, TableInfo]:
        """The registered ones of ``ids``, a chunk per query.

        serve's periodic jobs (rules, deadlines, followers) read only the tables
        they work on: loading all 10,000 tables each tick held the GIL long enough
        to stall the /ui pages served by the same process (bench/ui_render.py)."""
        wanted = sorted(set(ids))
        out: dict[int, TableInfo] = {}
        for i in range(0, len(wanted), NAMES_PER_READ):
            for row in self._db.read(_TABLE_INFOS_BY_IDS, {"ids": wanted[i : i + NAMES_PER_READ]}):
                out[row.id] = TableInfo.of(row)
        return out

    def tables_with_location(self) -> list[TableInfo]:
        """Tables registered with a location (the Spark commit pick-up's spool folders)."""
        if self._table_sql is None:
            return [TableInfo.of(r) for r in self._db.read(_TABLE_INFOS_WITH_LOCATION, {})]
        # Every Spark commit reads this: on the driver, as the other SQLite look-ups.
        return [_driver_table_info(r) for r in self._db.read_driver(_LOCATED_SQL, ())]

    def longest_retention(self) -> int:
        """The largest ``retention_seconds`` of any table (0 with none registered)."""
        rows = self._db.read(_LONGEST_RETENTION, {})
        return int(rows[0][0] or 0) if rows else 0

    def _tables_named(self, dbs: list[str], names: list[str]) -> list[TableInfo]:
        """Tables of any of ``dbs`` named any of ``names`` (a superset of the pairs asked)."""
        if self._table_sql is None:
            rows = self._db.read(_TABLE_INFOS_BY_NAMES, {"dbs": dbs, "names": names})
            return [TableInfo.of(r) for r in rows]
        sql = (f"SELECT {', '.join(_TABLE_COLUMNS)} FROM {_TABLES_T.name} "
               f"WHERE db IN ({', '.join('?' * len(dbs))}) "
               f"AND name IN ({', '.join('?' * len(names))})")
        return [_driver_table_info(r) for r in self._db.read_driver(sql, [*dbs, *names])]

    def tables(self) -> list[TableInfo]:
        with self._db.uow() as uow:
            return [TableInfo.of(r) for r in uow.tables.all()]

    def partition(self, table: TableInfo, spec: str) -> PartitionInfo | None:
        with self._db.uow() as uow:
            row = uow.partitions.get(table.id, spec)
            return None if row is None else _partition_info(row)

    def partitions(
        self,
        table: TableInfo,
        *,
        max_revision: int | None = None,
    ) -> list[PartitionInfo]:
        with self._db.uow() as uow:
            return [_partition_info(r) for r in uow.partitions.list(table.id, max_revision)]
