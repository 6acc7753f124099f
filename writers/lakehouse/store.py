"""``pn_lakehouse_tables``: the repository (takes a Session) and its facade (one unit of
work per method)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from partition_notify.store import Store, TableInfo
from partition_notify.store.uow import UnitOfWork, affected_rows
from partition_notify.writers.lakehouse.schema import (
    FORMATS,
    MAX_CATALOG_CHARS,
    MAX_IDENTIFIER_CHARS,
    MAX_LOCATION_CHARS,
    MAX_STOP_CHARS,
    MAX_UUID_CHARS,
    LakehouseTableRow,
)
from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from partition_notify.core import limits
from partition_notify.core.errors import ConflictError, ValidationError

#: Tables per lease statement (SQLite's bound-parameter limit is 999 on old builds).
_CHUNK = 500


@dataclass(frozen=True, slots=True)
class Followed:
    """One table followed by its commits, as the follower sees it."""

    table_id: int
    format: str
    catalog: str | None
    identifier: str | None
    location: str | None
    cursor: int | None
    #: The table's identity the cursor belongs to (None: not read yet).
    table_uuid: str | None = None
    #: The commit the follower cannot announce, and why (None: not stopped).
    stopped_at: int | None = None
    stopped_reason: str | None = None


def _followed(row: LakehouseTableRow) -> Followed:
    return Followed(row.table_id, row.format, row.catalog, row.identifier, row.location,
                    row.cursor, row.table_uuid, row.stopped_at, row.stopped_reason)


class LakehouseRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, table_id: int) -> LakehouseTableRow | None:
        return self.session.get(LakehouseTableRow, table_id)

    def of_format(self, fmt: str) -> list[LakehouseTableRow]:
        stmt = select(LakehouseTableRow).where(LakehouseTableRow.format == fmt)
        return list(self.session.scalars(stmt.order_by(LakehouseTableRow.table_id)))

    def claim(self, table_id: int, owner: str, now: float, until: float) -> bool:
        """Take or renew the lease unless another owner holds it unexpired."""
        stmt = (
            update(LakehouseTableRow)
            .where(LakehouseTableRow.table_id == table_id,
                   or_(LakehouseTableRow.lease_owner.is_(None),
                       LakehouseTableRow.lease_owner == owner,
                       LakehouseTableRow.lease_until < now))
            .values(lease_owner=owner, lease_until=until, updated_at=now)
        )
        return affected_rows(self.session.execute(stmt)) == 1

    def claim_many(self, table_ids: Sequence[int], owner: str, now: float,
                   until: float) -> list[LakehouseTableRow]:
        """Take or renew the leases of ``table_ids`` that no other owner holds unexpired;
        the rows this owner holds afterwards, read in the same transaction (their
        cursors are ours from here), in table order."""
        row = LakehouseTableRow
        held: list[LakehouseTableRow] = []
        for i in range(0, len(table_ids), _CHUNK):  # bound the statement's parameters
            chunk = list(table_ids[i:i + _CHUNK])
            self.session.execute(
                update(row)
                .where(row.table_id.in_(chunk),
                       or_(row.lease_owner.is_(None), row.lease_owner == owner,
                           row.lease_until < now))
                .values(lease_owner=owner, lease_until=until, updated_at=now))
            held += self.session.scalars(
                select(row).where(row.table_id.in_(chunk), row.lease_owner == owner)
                .order_by(row.table_id))
        return held

    def move(self, table_id: int, owner: str, before: int | None, after: int, now: float,
             until: float, *, gap: bool = False, uuid: str | None = None) -> bool:
        """Move the cursor from ``before`` to ``after`` while ``owner`` holds the lease
        (no longer stopped); ``uuid``: the table's identity at ``after``, when known."""
        row = LakehouseTableRow
        stmt = (
            update(row)
            .where(row.table_id == table_id, row.lease_owner == owner,
                   row.cursor.is_(None) if before is None else row.cursor == before)
            .values(cursor=after, lease_until=until, updated_at=now, stopped_at=None,
                    stopped_reason=None, **({"gaps": row.gaps + 1} if gap else {}),
                    **({"table_uuid": uuid[:MAX_UUID_CHARS]} if uuid else {}))
        )
        return affected_rows(self.session.execute(stmt)) == 1

    def stop(self, table_id: int, owner: str, revision: int, reason: str, now: float) -> None:
        """Record that the lease holder cannot announce commit ``revision``; not once an
        operator skipped it meanwhile (the cursor is that commit: a read that failed
        before the skip must not stop the table again)."""
        row = LakehouseTableRow
        self.session.execute(
            update(row).where(row.table_id == table_id, row.lease_owner == owner,
                              row.cursor != revision)
            .values(stopped_at=revision, stopped_reason=reason[:MAX_STOP_CHARS],
                    updated_at=now))

    def stop_loading(self, table_id: int, owner: str, cursor: int, at: int, reason: str,
                     now: float) -> None:
        """Record that the lease holder cannot load the table at ``cursor``: stopped at
        ``at``, the commit a skip resumes at (``cursor`` itself: nothing to skip to);
        not once the cursor moved meanwhile (a skip)."""
        row = LakehouseTableRow
        self.session.execute(
            update(row).where(row.table_id == table_id, row.lease_owner == owner,
                              row.cursor == cursor)
            .values(stopped_at=at, stopped_reason=reason[:MAX_STOP_CHARS], updated_at=now))

    def unstop(self, table_id: int, owner: str, now: float) -> None:
        """The lease holder read the table through: whatever stopped it is gone."""
        row = LakehouseTableRow
        self.session.execute(
            update(row).where(row.table_id == table_id, row.lease_owner == owner,
                              row.stopped_at.is_not(None))
            .values(stopped_at=None, stopped_reason=None, updated_at=now))

    def skip(self, table_id: int, before: int, revision: int, now: float) -> bool:
        """Move the cursor past the commit the table is stopped on, whoever leases it:
        only while the cursor is still ``before`` and the stop still ``revision``."""
        row = LakehouseTableRow
        stmt = (
            update(row)
            .where(row.table_id == table_id, row.cursor == before,
                   row.stopped_at == revision)
            .values(cursor=revision, stopped_at=None, stopped_reason=None,
                    gaps=row.gaps + 1, updated_at=now)
        )
        return affected_rows(self.session.execute(stmt)) == 1


class LakehouseTables:
    """Registration, listing, leases and cursor moves; each call is one unit of work."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def register(self, info: TableInfo, fmt: str, *, catalog: str | None = None,
                 identifier: str | None = None, location: str | None = None,
                 start: int | None = None) -> Followed:
        """Follow ``info`` in ``fmt`` after commit ``start`` (BEFORE_FIRST: from the first;
        None: from the commit current when ``serve`` first looks). Registering it again the
        same way changes nothing."""
        wanted = checked(info.qualified, fmt, catalog, identifier, location)
        with UnitOfWork(self.store.engine, write=True) as uow:
            repo = LakehouseRepository(uow.session)
            row = repo.get(info.id)
            if row is not None:
                have = (row.format, row.catalog, row.identifier, row.location)
                if have != wanted:
                    raise ConflictError(
                        f"{info.qualified} is followed as format={have[0]} catalog={have[1]} "
                        f"identifier={have[2]} location={have[3]}; registering it as "
                        f"format={wanted[0]} catalog={wanted[1]} identifier={wanted[2]} "
                        f"location={wanted[3]} would change what its cursor means")
                return _followed(row)
            row = LakehouseTableRow(table_id=info.id, format=wanted[0], catalog=wanted[1],
                                    identifier=wanted[2], location=wanted[3], cursor=start,
                                    gaps=0, updated_at=self.store.clock())
            uow.session.add(row)
            uow.session.flush()
            return _followed(row)

    def get(self, table_id: int) -> Followed | None:
        with UnitOfWork(self.store.engine, write=False) as uow:
            row = LakehouseRepository(uow.session).get(table_id)
            return None if row is None else _followed(row)

    def of_format(self, fmt: str) -> list[Followed]:
        with UnitOfWork(self.store.engine, write=False) as uow:
            return [_followed(r) for r in LakehouseRepository(uow.session).of_format(fmt)]

    def stopped(self, limit: int) -> list[Followed]:
        """Up to ``limit`` tables stopped on a commit they cannot announce (``/ui/ops``)."""
        row = LakehouseTableRow
        stmt = select(row).where(row.stopped_at.is_not(None)).order_by(row.table_id)
        with UnitOfWork(self.store.engine, write=False) as uow:
            return [_followed(r) for r in uow.session.scalars(stmt.limit(limit))]

    def gaps(self, table_id: int) -> int:
        with UnitOfWork(self.store.engine, write=False) as uow:
            row = LakehouseRepository(uow.session).get(table_id)
            return 0 if row is None else row.gaps

    def claim(self, table_id: int, owner: str, seconds: float) -> bool:
        now = self.store.clock()
        with UnitOfWork(self.store.engine, write=True) as uow:
            return LakehouseRepository(uow.session).claim(table_id, owner, now, now + seconds)

    def claim_many(self, table_ids: Sequence[int], owner: str,
                   seconds: float) -> list[Followed]:
        """:meth:`claim` for many tables in one transaction: the ones now held, with
        their cursors."""
        now = self.store.clock()
        with UnitOfWork(self.store.engine, write=True) as uow:
            rows = LakehouseRepository(uow.session).claim_many(table_ids, owner, now,
                                                               now + seconds)
            return [_followed(r) for r in rows]

    def release_all(self, fmt: str, owner: str) -> int:
        """Let go of every ``fmt`` table ``owner`` holds, in one statement; how many."""
        row = LakehouseTableRow
        with UnitOfWork(self.store.engine, write=True) as uow:
            return affected_rows(uow.session.execute(
                update(row).where(row.format == fmt, row.lease_owner == owner)
                .values(lease_owner=None, lease_until=None)))

    def move(self, table_id: int, owner: str, before: int | None, after: int,
             lease_seconds: float, *, gap: bool = False, uuid: str | None = None) -> None:
        """Move the cursor without logging anything (first follow, gap)."""
        with UnitOfWork(self.store.engine, write=True) as uow:
            self.move_in(uow, table_id, owner, before, after, lease_seconds, gap=gap,
                         uuid=uuid)

    def stop(self, table_id: int, owner: str, revision: int, reason: str) -> None:
        """The follower cannot announce commit ``revision``: say so with the row."""
        with UnitOfWork(self.store.engine, write=True) as uow:
            LakehouseRepository(uow.session).stop(table_id, owner, revision, reason,
                                                  self.store.clock())

    def stop_loading(self, table_id: int, owner: str, cursor: int, at: int,
                     reason: str) -> None:
        """The follower cannot load the table at ``cursor``: say so with the row."""
        with UnitOfWork(self.store.engine, write=True) as uow:
            LakehouseRepository(uow.session).stop_loading(table_id, owner, cursor, at,
                                                          reason, self.store.clock())

    def unstop(self, table_id: int, owner: str) -> None:
        with UnitOfWork(self.store.engine, write=True) as uow:
            LakehouseRepository(uow.session).unstop(table_id, owner, self.store.clock())

    def move_in(self, uow: UnitOfWork, table_id: int, owner: str, before: int | None,
                after: int, lease_seconds: float, *, gap: bool = False,
                uuid: str | None = None) -> None:
        """Move the cursor inside ``uow`` (the transaction logging the commit's events).

        Raises ConflictError, rolling the events back, when another process took
        the table over or moved its cursor meanwhile.
        """
        now = self.store.clock()
        if not LakehouseRepository(uow.session).move(table_id, owner, before, after, now,
                                                     now + lease_seconds, gap=gap, uuid=uuid):
            raise ConflictError(f"table #{table_id}: its lease or cursor moved to another "
                                f"process (expected cursor {before}); not announcing twice")


def checked(what: str, fmt: str, catalog: str | None, identifier: str | None,
            location: str | None) -> tuple[str, str | None, str | None, str | None]:
    """The registration of ``what`` as stored: format, catalog, identifier, location.

    Raises ValidationError naming the option that is missing or wrong.
    """
    if fmt not in FORMATS:
        raise ValidationError(f"{what}: format {fmt!r} is not one of {', '.join(FORMATS)}")
    if fmt == "iceberg":
        if not catalog:
            raise ValidationError(f"{what}: format iceberg needs --catalog NAME "
                                  "(its properties come from PN_ICEBERG_CATALOG__NAME__*)")
        ident = identifier or what
        _fits(what, "catalog", catalog, MAX_CATALOG_CHARS)
        _fits(what, "identifier", ident, MAX_IDENTIFIER_CHARS)
        return fmt, catalog, ident, None
    if not location:
        raise ValidationError(f"{what}: format delta needs --location PATH (the table's root, "
                              "where _delta_log is)")
    if catalog or identifier:
        raise ValidationError(f"{what}: format delta takes --location, not --catalog/--identifier")
    _fits(what, "location", location, MAX_LOCATION_CHARS)
    limits.location(location, field=f"location of {what}")  # before its log is read
    return fmt, None, None, location.rstrip("/")


def _fits(what: str, name: str, value: str, limit: int) -> None:
    if len(value) > limit:
        raise ValidationError(f"{what}: {name} is {len(value)} characters; at most {limit}")
