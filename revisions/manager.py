"""The revision manager over the SQL store.

Writers run in *write transactions*: ``begin_write_transaction`` hands out a
revision, unique and strictly increasing per table; the writer tags its data
with it and then commits or aborts. Readers ask for a *snapshot*: for every
column family, the highest revision such that no transaction at or below it
is still running on that family (the lowest running revision - 1, or the
latest allocated revision when none is running), plus the aborted revisions
to leave out. Reading only ``revision <= snapshot.revision(family)`` minus
the aborted ones is repeatable: nothing at or below can still change.

Everything lives in the store (``pn_revision_*``), so it survives restarts
and is shared by every process using the same database. Every state change
of a table locks that table's counter row first, which serialises them.

Expiry is lazy by design and needs no timer thread: a running
transaction whose keep-alive has run out counts as aborted from that moment
on. ``create_snapshot`` skips it (listing it as aborted); the next
``begin_write_transaction`` (or abort) of the table records it as aborted;
``commit``/``keep_alive`` refuse it. Expiry compares the callers' clocks
with the stored deadline, so hosts must agree on the time to well within a
keep-alive period. An aborted transaction's data is not
rolled back: readers exclude it through ``Snapshot.aborted``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from partition_notify.revisions.model import (
    DEFAULT_FAMILY,
    DEFAULT_KEEP_ALIVE_SECONDS,
    Clock,
    Snapshot,
    WriteTransaction,
    family_names,
    keep_alive_seconds,
    normal_table,
    table_name,
    unknown_table,
)
from partition_notify.revisions.placement import refuse_abort_if_placed
from partition_notify.revisions.repositories import RevisionUnitOfWork
from partition_notify.revisions.schema import ABORTED, RUNNING, RevisionTxnRow
from sqlalchemy import Engine

from partition_notify.core.errors import ConflictError, NotFoundError, ValidationError

if TYPE_CHECKING:
    from partition_notify.store.provider import PartitionInfo, Store, TableInfo

log = logging.getLogger(__name__)


class _HasEngine(Protocol):
    @property
    def engine(self) -> Engine: ...

class RevisionManager:
    """Revisions, write transactions and snapshots of tables, kept in the SQL store.

    ``store`` is a :class:`store.Store` (or anything with an ``engine``) or a
    SQLAlchemy engine whose database has been migrated. Table names are free
    strings (``"db.table"`` by convention): the manager does not require the
    table to be registered for notifications, keeping it
    independent of the catalogue.
    """

    def __init__(
        self,
        store: _HasEngine | Engine,
        *,
        clock: Clock = time.time,
        default_keep_alive: float = DEFAULT_KEEP_ALIVE_SECONDS,
    ) -> None:
        self.engine: Engine = store if isinstance(store, Engine) else store.engine
        self.clock = clock
        self.default_keep_alive = keep_alive_seconds(default_keep_alive)
        # A snapshot is several reads that must agree with each other.
        self._read_engine = (
            self.engine.execution_options(isolation_level="REPEATABLE READ")
            if self.engine.dialect.name == "postgresql"
            else self.engine
        )

    def _write(self) -> RevisionUnitOfWork:
        return RevisionUnitOfWork(self.engine, write=True)

    def _read(self) -> RevisionUnitOfWork:
        return RevisionUnitOfWork(self._read_engine, write=False)

    # -- transactions ---------------------------------------------------------
    def begin_write_transaction(
        self, table: str, families: Iterable[str], keep_alive: float | None = None
    ) -> WriteTransaction:
        """Start a transaction writing ``families`` of ``table``; expires after ``keep_alive`` s."""
        with self._write() as uow:
            return self.begin_in(uow, table, families, keep_alive)

    def begin_in(
        self,
        uow: RevisionUnitOfWork,
        table: str,
        families: Iterable[str],
        keep_alive: float | None = None,
    ) -> WriteTransaction:
        """:meth:`begin_write_transaction` inside the caller's unit of work."""
        name = table_name(table)
        fams = family_names(families, table=name)
        seconds = self.default_keep_alive if keep_alive is None else keep_alive_seconds(keep_alive)
        now = self.clock()
        last = uow.revisions.lock_table(name, now, create=True)
        assert last is not None
        expired = uow.revisions.expire_running(name, now)
        if expired:
            log.info("table %s: transactions %s expired and count as aborted", name, expired)
        revision = last + 1
        uow.revisions.set_last(name, revision)
        uow.revisions.add_families(name, fams, revision)
        row = RevisionTxnRow(
            table_name=name,
            revision=revision,
            families=list(fams),
            state=RUNNING,
            keep_alive_seconds=seconds,
            started_at=now,
            expires_at=now + seconds,
        )
        uow.revisions.add_txn(row)
        return WriteTransaction._of(row)

    def commit_write_transaction(self, tx: WriteTransaction) -> None:
        """Commit ``tx``; its revision becomes visible to later snapshots.

        Committing twice is harmless. An aborted or expired transaction
        cannot commit: :class:`ConflictError`.
        """
        with self._write() as uow:
            refusal = self.commit_in(uow, tx)
        if refusal is not None:
            raise refusal

    def commit_in(self, uow: RevisionUnitOfWork, tx: WriteTransaction) -> ConflictError | None:
        """Commit inside the caller's unit of work.

        Returns the error to raise *after* the unit of work has committed (an
        expiry found here must still be recorded), or None on success.
        """
        now = self.clock()
        row = self._locked_txn(uow, tx)
        if row is None:
            return None  # committed before
        if row.state == ABORTED:
            return ConflictError(
                f"transaction {tx.revision} on table {tx.table} was "
                f"{row.reason or 'aborted'}; it cannot commit"
            )
        if row.expires_at <= now:
            self._expire(row, now)
            return ConflictError(
                f"transaction {tx.revision} on table {tx.table} expired at {row.expires_at:.3f} "
                f"(keep-alive {row.keep_alive_seconds:g} s, now {now:.3f}) and counts as "
                "aborted; call keep_alive more often or begin with a longer keep_alive"
            )
        uow.revisions.end_txn(tx.table, tx.revision)
        # Files its overwrites moved aside stay a retention from now (revisions/vacuum.py).
        uow.replacements.committed(tx.table, tx.revision, now)
        return None

    def abort_write_transaction(self, tx: WriteTransaction) -> None:
        """Abort ``tx``: snapshots list its revision as aborted. Aborting twice is harmless."""
        with self._write() as uow:
            self.abort_in(uow, tx)

    def abort_in(self, uow: RevisionUnitOfWork, tx: WriteTransaction) -> None:
        now = self.clock()
        row = self._locked_txn(uow, tx)
        if row is None:
            raise ConflictError(
                f"transaction {tx.revision} on table {tx.table} has committed; it cannot abort"
            )
        if row.state == RUNNING:  # aborting twice stays harmless
            refuse_abort_if_placed(uow, tx.table, tx.revision)
        uow.revisions.expire_running(tx.table, now)
        if row.state == RUNNING:
            row.state, row.reason, row.ended_at = ABORTED, "aborted", now
            uow.session.flush()

    def keep_alive(self, tx: WriteTransaction, seconds: float | None = None) -> WriteTransaction:
        """Push ``tx``'s expiry to now + ``seconds`` (default: its own keep-alive)."""
        extend = None if seconds is None else keep_alive_seconds(seconds)
        with self._write() as uow:
            now = self.clock()
            row = self._locked_txn(uow, tx)
            if row is None:
                raise ConflictError(
                    f"transaction {tx.revision} on table {tx.table} has "
                    "committed; there is nothing to keep alive"
                )
            if row.state == ABORTED:
                raise ConflictError(
                    f"transaction {tx.revision} on table {tx.table} was "
                    f"{row.reason or 'aborted'}; it cannot be kept alive"
                )
            expired = row.expires_at <= now
            if expired:
                self._expire(row, now)
            else:
                row.expires_at = now + (row.keep_alive_seconds if extend is None else extend)
            uow.session.flush()
            result = WriteTransaction._of(row)
        if expired:
            raise ConflictError(
                f"transaction {tx.revision} on table {tx.table} expired at "
                f"{result.expires_at:.3f} (now {now:.3f}) and counts as aborted"
            )
        return result

    @contextmanager
    def kept_alive(
        self,
        tx: WriteTransaction,
        interval: float | None = None,
    ) -> Iterator[KeepAlive]:
        """Keep ``tx`` alive from a background thread while the block runs (long writes)."""
        keeper = KeepAlive(self, tx, tx.keep_alive / 3 if interval is None else interval)
        keeper.start()
        try:
            yield keeper
        finally:
            keeper.stop()

    # -- snapshots ------------------------------------------------------------
    def create_snapshot(self, table: str, revision: int | None = None) -> Snapshot:
        """The latest snapshot of ``table``, or the snapshot at ``revision``.

        A registered table or SNAPSHOT dataset no transaction has touched
        yet has the empty snapshot (revision 0); any other name is a
        :class:`NotFoundError` naming it. A given ``revision`` must have been allocated
        (:class:`NotFoundError` otherwise) and no transaction at or below it
        may still be running (:class:`ConflictError`): such a snapshot would
        not be repeatable.
        """
        name = table_name(table)
        if revision is not None and (not isinstance(revision, int) or revision < 0):
            raise ValidationError(f"revision must be a non-negative integer, got {revision!r}")
        now = self.clock()
        with self._read() as uow:
            last = uow.revisions.last_revision(name)
            if last is None:
                if not uow.revisions.is_registered(name):
                    normal = normal_table(name)
                    raise unknown_table(name, normal if normal not in (None, name)
                                        and uow.revisions.is_registered(normal) else None)
                if revision:
                    raise NotFoundError(f"table {name} has no revisions; {revision} does not exist")
                return Snapshot(name, {}, 0)
            families = uow.revisions.families(name)
            running = [WriteTransaction._of(r) for r in uow.revisions.running(name)]
            aborted = set(uow.revisions.aborted_revisions(name))
        live = [r for r in running if r.expires_at > now]
        # Expired but not yet recorded (that happens at the next begin): already aborted.
        aborted.update(r.revision for r in running if r.expires_at <= now)
        if revision is None:
            lowest: dict[str, int] = {}
            for r in live:
                for f in r.families:
                    lowest.setdefault(f, r.revision)
            revs = {f: lowest[f] - 1 if f in lowest else last for f in families}
            return Snapshot(name, revs, last, frozenset(aborted))
        if revision > last:
            raise NotFoundError(
                f"revision {revision} of table {name} has not been allocated (latest is {last})"
            )
        blocking = [r for r in live if r.revision <= revision]
        if blocking:
            b = blocking[0]
            raise ConflictError(
                f"no repeatable snapshot of table {name} at revision {revision} yet: "
                f"transaction {b.revision} (families {', '.join(b.families)}) is still running"
            )
        return Snapshot(
            name,
            dict.fromkeys(families, revision),
            revision,
            frozenset(a for a in aborted if a <= revision),
        )

    # -- inspection (CLI) -----------------------------------------------------
    def running_transactions(self, table: str) -> list[WriteTransaction]:
        """Transactions of ``table`` still running (expired ones excluded)."""
        now = self.clock()
        with self._read() as uow:
            rows = uow.revisions.running(table_name(table))
            return [WriteTransaction._of(r) for r in rows if r.expires_at > now]

    def aborted_revisions(self, table: str) -> list[int]:
        """Aborted revisions of ``table``, including expired transactions not yet recorded."""
        now = self.clock()
        with self._read() as uow:
            name = table_name(table)
            out = set(uow.revisions.aborted_revisions(name))
            out.update(int(r.revision) for r in uow.revisions.running(name) if r.expires_at <= now)
        return sorted(out)

    def tables(self) -> list[str]:
        with self._read() as uow:
            return uow.revisions.tables()

    # -- internals ------------------------------------------------------------
    @staticmethod
    def _locked_txn(uow: RevisionUnitOfWork, tx: WriteTransaction) -> RevisionTxnRow | None:
        """Lock ``tx``'s table and return its row; None means it committed."""
        if not isinstance(tx, WriteTransaction):  # e.g. its JSON: WriteTransaction.from_dict
            raise ValidationError(f"expected a WriteTransaction, got {type(tx).__name__}")
        last = uow.revisions.lock_table(tx.table, 0.0, create=False)
        if last is None or tx.revision > last or tx.revision < 1:
            raise NotFoundError(f"table {tx.table} has no transaction {tx.revision}")
        return uow.revisions.get_txn(tx.table, tx.revision)

    @staticmethod
    def _expire(row: RevisionTxnRow, now: float) -> None:
        row.state, row.reason, row.ended_at = ABORTED, "expired", now


class KeepAlive:
    """Calls :meth:`RevisionManager.keep_alive` every ``interval`` s until stopped.

    A refused keep-alive (the transaction expired or was aborted) ends the
    thread and is kept in :attr:`error`; the commit will then fail too.
    Store errors are retried at the next tick.
    """

    def __init__(self, manager: RevisionManager, tx: WriteTransaction, interval: float) -> None:
        if not interval > 0:
            raise ValidationError(f"keep-alive interval must be positive, got {interval!r}")
        self.manager, self.tx, self.interval = manager, tx, interval
        self.error: Exception | None = None
        #: Set after every successful refresh (lets callers observe one).
        self.refreshed = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, daemon=True, name=f"keep-alive {tx.table}@{tx.revision}"
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        from partition_notify.core.errors import StoreError

        while not self._stop.wait(self.interval):
            try:
                self.tx = self.manager.keep_alive(self.tx)
                self.refreshed.set()
            except StoreError as exc:
                log.warning(
                    "keep-alive of %s@%d failed, retrying: %s", self.tx.table, self.tx.revision, exc
                )
            except (ConflictError, NotFoundError) as exc:
                self.error = exc
                return


def snapshot_partitions(
    store: Store, table: TableInfo, snapshot: Snapshot, family: str = DEFAULT_FAMILY
) -> list[PartitionInfo]:
    """The announced partitions of ``table`` that ``snapshot`` covers, for a scheduler.

    Exactly those whose revision is committed and covered: partitions
    announced without a revision, above the snapshot or by an aborted
    transaction are left out. The store keeps one row per partition (its
    latest announcement), so a partition overwritten by a later revision
    drops out of older snapshots rather than reverting to its old revision.
    """
    limit = snapshot.revision(family)
    return [
        p
        for p in store.catalog.partitions(table, max_revision=limit)
        if p.revision is not None and snapshot.includes(p.revision, family)
    ]


__all__ = ["KeepAlive", "RevisionManager", "snapshot_partitions"]
