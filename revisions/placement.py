"""The placement lease: one write at a time moves its data into a table.

A transactional write's overwrite retirement and its merge are one step per
table (revisions/files.py ``RevisionFiles.placing``). That step used to hold the
table's revision row lock for the renames, which on SQLite is the database's
write lock: every other write of the store, any table, waited for them and gave
up past its busy timeout. Now a short transaction takes the table's lease row
(``pn_revision_placements``: holder = write id, a token, an expiry) after the
overtaken check, the renames run outside any database transaction while a
thread renews the lease, and a short transaction releases it, committing the
placement's rows (the overwrite's retirement) with the release.

A lease past its expiry belongs to a writer that died or stopped renewing; the
next placement of the table takes it over, and the recovery of the same write
takes its own lease at once (only one process resumes a write: its staging
lock). What a dead holder half-did is what a rolled-back placement left
before: files partly moved, no rows; its recovery retires again (idempotent,
keeping later writes' files) and finishes the merge. Expiry compares the
callers' clocks with the stored time, like the write transactions' keep-alive.

A holder learns it lost the lease in memory (:meth:`PlacementLease.check`, before each
rename): a renewal found it taken over, or none succeeded for a whole lease (the
store unreachable, the row locked), after which another write may take it over. It
then renames no more. One JVM call (the FileOutputCommitter merge) is not stopped
half-way: a lease lost during it is found at the release.

The taking of the lease also records on the write that its placement began
(``pn_revision_placing``, :func:`placement_began`), deleted by the release that records
its rows: unlike the lease, it outlasts a crash and another write taking the lease
over, so the abort refusal and housekeeping still know that files may have moved.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable

from partition_notify.revisions.repositories import RevisionRepository, RevisionUnitOfWork
from partition_notify.revisions.schema import (
    ABORTED,
    RevisionFileRow,
    RevisionPlacementRow,
    RevisionPlacingRow,
    RevisionReplacementRow,
)
from sqlalchemy import Engine, delete, select, update
from sqlalchemy.orm import Session

from partition_notify.core.errors import (
    AbortedOverwriteError,
    ConflictError,
    PlacedOverwriteAbortError,
    StoreError,
)

log = logging.getLogger(__name__)

#: A placement lease lasts this long past its last renewal (store clock).
PLACEMENT_LEASE_SECONDS = 60.0
#: A placement waits this long at most for a table's lease a live write holds.
PLACEMENT_WAIT_SECONDS = 3600.0
#: How often a waiting placement looks at the lease again.
POLL_SECONDS = 0.1

#: Raises if the write may not be placed (overtaken); runs in the taking transaction.
Check = Callable[[RevisionUnitOfWork], None]
#: Writes the placement's rows; runs in the releasing transaction.
Commit = Callable[[RevisionUnitOfWork], None]


class PlacementLease:
    """A table's placement lease, held by one write; renewed by a thread until released."""

    def __init__(self, engine: Engine, clock: Callable[[], float], table: str, holder: str,
                 token: str, seconds: float) -> None:
        self.engine, self.clock, self.table, self.holder = engine, clock, table, holder
        self.token, self.seconds = token, seconds
        #: Renewals so far; ``beat`` is notified after each.
        self.renewals = 0
        self.beat = threading.Condition()
        #: Set when a renewal found the lease taken over, or none succeeded for a whole
        #: lease: the holder renames no more (:meth:`check`), the release refuses.
        self.lost: str | None = None
        #: Monotonic time the lease surely lasts till: it was taken or renewed with
        #: ``seconds`` at a store time after the transaction began (clocks agreeing).
        self._valid_until = time.monotonic() + seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew_until_stopped, daemon=True,
                                        name=f"placement lease {table}")

    @classmethod
    def take(cls, engine: Engine, clock: Callable[[], float], table: str, holder: str,
             check: Check, *, seconds: float = PLACEMENT_LEASE_SECONDS,
             wait_seconds: float = PLACEMENT_WAIT_SECONDS) -> PlacementLease:
        """Take ``table``'s lease for write ``holder`` once ``check`` passes, waiting
        up to ``wait_seconds`` for a live holder; :class:`ConflictError` past that."""
        token = secrets.token_hex(16)
        give_up = time.monotonic() + wait_seconds
        while True:
            began = time.monotonic()
            with RevisionUnitOfWork(engine, write=True) as uow:
                now = clock()
                # The revision row lock orders this with begin/commit/abort of the table.
                uow.revisions.lock_table(table, now, create=False)
                row = uow.session.get(RevisionPlacementRow, table, with_for_update=True)
                taken = row is None or row.holder == holder or row.expires_at <= now
                if taken:
                    check(uow)
                    _take(uow, row, table, holder, token, now, seconds)
                else:
                    assert row is not None
                    other, until = row.holder, row.expires_at
            if taken:  # committed: only now is there a lease to renew
                lease = cls(engine, clock, table, holder, token, seconds)
                lease._valid_until = began + seconds
                lease._thread.start()
                return lease
            if time.monotonic() >= give_up:
                raise ConflictError(
                    f"the placement lease of {table} is held by write {other} (renewed "
                    f"until {until:.3f}, now {now:.3f}); write {holder} waited "
                    f"{wait_seconds:g} s for it and placed nothing; its commit resumes "
                    "(recover()) once that write is done")
            time.sleep(POLL_SECONDS)

    def release(self, commit: Commit | None) -> None:
        """Stop renewing; commit the placement's rows (``commit``) with the release.

        :class:`ConflictError` if the lease was taken over meanwhile: the rows are
        not written and the write's recovery places it again. Without ``commit`` (the
        placement failed) the lease is let go best-effort: a store error is logged,
        the lease then expires (or the write's recovery takes it).
        """
        self._stop.set()
        self._thread.join(30)
        try:
            with RevisionUnitOfWork(self.engine, write=True) as uow:
                if commit is not None:
                    uow.revisions.lock_table(self.table, self.clock(), create=False)
                held = uow.session.execute(delete(RevisionPlacementRow).where(
                    RevisionPlacementRow.table_name == self.table,
                    RevisionPlacementRow.token == self.token)).rowcount  # type: ignore[attr-defined]
                if held and commit is not None:
                    commit(uow)
                elif commit is not None:
                    raise self._taken_over()
        except StoreError as exc:
            if commit is not None:
                raise
            log.warning("placement lease of %s (write %s) not released, it expires: %s",
                        self.table, self.holder, exc)

    def check(self) -> None:
        """:class:`ConflictError` once the lease may belong to another write (taken over,
        or not renewed for a whole lease): called before each rename, so a holder that
        lost it stops moving files and leaves the rest to its recovery. In memory."""
        if self.lost is None and time.monotonic() >= self._valid_until:
            self._lose(f"no renewal succeeded for {self.seconds:g} s")
        if self.lost is not None:
            raise self._taken_over()

    def _lose(self, why: str) -> None:
        if self.lost is None:
            self.lost = why
            log.error("placement lease of %s (write %s): %s; it renames no more, its "
                      "recovery places it", self.table, self.holder, why)
        with self.beat:
            self.beat.notify_all()

    def _taken_over(self) -> ConflictError:
        return ConflictError(
            f"the placement lease of {self.table} held by write {self.holder} was taken "
            f"over while its files moved ({self.lost or 'it expired'}; lease "
            f"{self.seconds:g} s, renewed every {self.seconds / 4:g} s); its rows were not "
            "recorded: its commit resumes (recover()) and places it again")

    def _renew_until_stopped(self) -> None:
        while not self._stop.wait(self.seconds / 4):
            began = time.monotonic()
            try:
                with RevisionUnitOfWork(self.engine, write=True) as uow:
                    now = self.clock()
                    held = uow.session.execute(update(RevisionPlacementRow).where(
                        RevisionPlacementRow.table_name == self.table,
                        RevisionPlacementRow.token == self.token,
                        RevisionPlacementRow.expires_at > now,
                    ).values(expires_at=now + self.seconds)).rowcount  # type: ignore[attr-defined]
            except StoreError as exc:  # retried at the next beat, like the keep-alive
                log.warning("renewing the placement lease of %s (write %s) failed, "
                            "retrying: %s", self.table, self.holder, exc)
                if time.monotonic() >= self._valid_until:
                    self._lose(f"no renewal succeeded for {self.seconds:g} s ({exc})")
                    return
                continue
            if not held:
                self._lose(f"a renewal at {now:.3f} found it expired or taken over")
                return
            self._valid_until = began + self.seconds
            with self.beat:
                self.renewals += 1
                self.beat.notify_all()


def placing_now(session: Session, tables: Iterable[str], now: float) -> set[str]:
    """Of ``tables``, those a live placement holds the lease of; the others' leases are
    held by the caller's transaction till it ends (housekeeping deleting files).

    Without waiting: the tables' revision rows are locked (a placement takes its lease
    under that lock, so none begins till the transaction ends) and the lease rows
    read; an expired lease counts as free, as it does for a placement taking it over."""
    revisions = RevisionRepository(session)
    busy = set()
    for table in sorted(set(tables)):  # one order: two such callers never deadlock
        revisions.lock_table(table, now, create=False)
        row = session.get(RevisionPlacementRow, table, with_for_update=True)
        if row is not None and row.expires_at > now:
            busy.add(table)
            log.info("placement lease of %s held by write %s until %.3f: its aborted "
                     "writes' files are deleted at a later housekeeping pass", table,
                     row.holder, row.expires_at)
    return busy


def placement_began(uow: RevisionUnitOfWork, table: str, revision: int, write_id: str,
                    now: float, *, retiring: bool) -> None:
    """Record that write ``write_id`` places at ``revision`` now (``retiring``: an
    overwrite that has yet to retire): in the transaction that takes the lease for it,
    before any rename. It lasts past the lease (a crash, another write taking it over)
    till :func:`placement_done`; a write placing again at another revision (its
    recovery's adopting one) gets a row for that one too."""
    row = uow.session.get(RevisionPlacingRow, (table, write_id, revision),
                          with_for_update=True)
    if row is None:
        uow.session.add(RevisionPlacingRow(table_name=table, write_id=write_id,
                                           revision=revision, began_at=now,
                                           retiring=retiring))
    else:
        row.retiring = row.retiring or retiring
    uow.session.flush()


def placement_done(session: Session, table: str, write_id: str) -> None:
    """The write's placement finished (its rows are recorded in this transaction), or
    it is discarded: no longer a placement begun."""
    p = RevisionPlacingRow
    session.execute(delete(p).where(p.table_name == table, p.write_id == write_id))


def refuse_abort_if_placed(uow: RevisionUnitOfWork, table: str, revision: int) -> None:
    """:class:`PlacedOverwriteAbortError` if revision ``revision`` of ``table`` retired
    a partition's files (an overwrite placed: its retirement rows are written with the
    lease's release), or one of its writes began placing and has not finished
    (:func:`placement_began`: under way, or cut short by a crash, whoever holds the
    lease since), or the table's lease names one of its writes.

    Nothing rolls an aborted revision back (docs/revisions.md): aborted, such an
    overwrite would leave its rows where plain reads find them and the partition's old
    files in ``_pn_retired`` for good (housekeeping purges the aborted revision's rows,
    and with them every record of what was moved aside)."""
    f, r, p, b = RevisionFileRow, RevisionReplacementRow, RevisionPlacementRow, RevisionPlacingRow
    s = uow.session
    retired = s.scalars(select(r.write_id).where(r.table_name == table, r.revision == revision)
                        .limit(1)).first()
    began = s.execute(select(b.write_id, b.began_at).where(
        b.table_name == table, b.revision == revision).order_by(b.began_at).limit(1)).first()
    writes = select(f.write_id).where(f.table_name == table, f.revision == revision)
    placing = s.scalars(select(p.holder).where(p.table_name == table,
                                               p.holder.in_(writes))).first()
    if retired is not None:
        what = (f"write {retired} placed it (retired the partitions' old files to "
                "_pn_retired/ and merged its own)")
    elif began is not None:
        what = (f"write {began[0]} began placing it at {began[1]:.3f} and has not finished "
                "(its placement is under way, or was cut short: some of the partitions' "
                "files may have moved; its recovery places it)")
    elif placing is not None:
        what = (f"write {placing} holds the table's placement lease (its placement is "
                "under way or was cut short; its recovery places it)")
    else:
        return
    raise PlacedOverwriteAbortError(
        f"revision {revision} of {table} cannot be aborted: {what}. An aborted revision's "
        "data is not rolled back, so plain reads would keep its rows and lose the "
        "partitions' old ones for good; commit it (rev commit, or the write's recover()), "
        "or write the partitions again")


def refuse_aborted_overwrite(uow: RevisionUnitOfWork, table: str, revision: int,
                             write_id: str) -> None:
    """:class:`AbortedOverwriteError` if overwrite ``write_id``'s revision was aborted on
    request and it has retired nothing yet (see :func:`refuse_abort_if_placed`)."""
    row = uow.revisions.get_txn(table, revision)
    if row is None or row.state != ABORTED or row.reason == "expired":
        return  # running, committed, or expired (settle may adopt it)
    if uow.replacements.has_write(table, write_id):
        return  # retired before the abort (an older release): finished as it was
    raise AbortedOverwriteError(
        f"overwrite {write_id} of {table} at revision {revision} was aborted on request "
        "before it placed; it is not placed (it would retire the partitions' files for a "
        "revision no snapshot includes, and nothing rolls that back): nothing of it moved, "
        "its staged data is deleted. Write it again to replace the partitions")


def _take(uow: RevisionUnitOfWork, row: RevisionPlacementRow | None, table: str, holder: str,
          token: str, now: float, seconds: float) -> None:
    if row is None:
        uow.session.add(RevisionPlacementRow(table_name=table, holder=holder, token=token,
                                             acquired_at=now, expires_at=now + seconds))
        uow.session.flush()
        return
    if row.holder != holder:
        log.warning("placement lease of %s: write %s takes it over from write %s, whose "
                    "lease expired at %.3f (its writer died or stopped renewing; its "
                    "recovery finishes its placement)", table, holder, row.holder,
                    row.expires_at)
    row.holder, row.token, row.acquired_at, row.expires_at = holder, token, now, now + seconds
    uow.session.flush()


__all__ = ["PLACEMENT_LEASE_SECONDS", "PLACEMENT_WAIT_SECONDS", "PlacementLease",
           "placement_began", "placement_done", "placing_now", "refuse_abort_if_placed",
           "refuse_aborted_overwrite"]
