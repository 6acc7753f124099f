"""The files of each revision, and settling a writer's revision so its data stays readable.

A write transaction records every data file it adds (``record``) and, for an
overwrite, the partitions it replaces and where their old files went
(``retire``). A snapshot then reads exactly the files of the committed
revisions it covers, minus those hidden by a covered overwrite of their
partition (``visible``): later appends add files the snapshot does not list,
later overwrites move old files aside instead of deleting them, so the same
snapshot returns the same rows.

``settle`` ends a write: it commits the transaction, or, if its keep-alive
ran out while the data was being published, moves everything tagged with
the expired revision (files, replacements, announced partitions) to a new
revision and commits that, in one database transaction. A write that
published is thereby always readable at a committed revision.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Literal

from partition_notify.revisions.adoption import refuse_placed_over
from partition_notify.revisions.manager import RevisionManager
from partition_notify.revisions.model import DEFAULT_FAMILY, Snapshot, WriteTransaction
from partition_notify.revisions.placement import (
    PLACEMENT_LEASE_SECONDS,
    PLACEMENT_WAIT_SECONDS,
    PlacementLease,
    placement_began,
    placement_done,
    refuse_aborted_overwrite,
)
from partition_notify.revisions.repositories import RevisionUnitOfWork
from partition_notify.revisions.schema import ABORTED, RevisionFileRow, RevisionReplacementRow

from partition_notify.core.errors import (
    ConflictError,
    NotFoundError,
    SnapshotFilesRemovedError,
    WriteOvertakenError,
)
from partition_notify.core.limits import RETIRED_FILE_RETENTION_SECONDS

log = logging.getLogger(__name__)

State = Literal["running", "committed", "expired", "aborted"]


class RevisionFiles:
    """File bookkeeping and revision settling for writers, over a revision manager's store."""

    def __init__(self, manager: RevisionManager, *,
                 lease_seconds: float = PLACEMENT_LEASE_SECONDS) -> None:
        self.manager = manager
        #: How long a placement's lease lasts past each renewal (every quarter of it).
        self.lease_seconds = lease_seconds

    def _uow(self, *, write: bool) -> RevisionUnitOfWork:
        return RevisionUnitOfWork(self.manager.engine, write=write)

    # -- files ------------------------------------------------------------------
    def record(self, table: str, revision: int, write_id: str,
               listing: Callable[[], Iterable[str]]) -> int:
        """Record the files ``listing`` gives (``<partition dir>/<file name>``) once per write.

        ``listing`` is only called when the write has recorded nothing yet, so
        a resumed write (whose staged files may have moved) records nothing twice.
        """
        with self._uow(write=False) as uow:
            if uow.files.has_write(table, write_id):
                return 0
        rows = []
        for path in listing():
            partition, _, name = path.rpartition("/")
            rows.append({"table_name": table, "revision": revision, "write_id": write_id,
                         "partition": partition, "name": name, "retired_to": None})
        with self._uow(write=True) as uow:
            if uow.files.has_write(table, write_id):
                return 0
            uow.files.add_many(rows)
        return len(rows)

    def retire(self, table: str, revision: int, write_id: str, partitions: Sequence[str],
               retired_to: str) -> set[str]:
        """:meth:`Placement.retire` in a placement of its own (no files move)."""
        with self.placing(table, revision, write_id, partitions) as place:
            return place.retire(partitions, retired_to)

    @contextmanager
    def placing(self, table: str, revision: int, write_id: str, partitions: Sequence[str], *,
                merge_begun: bool = False, retiring: bool = False,
                adopting: Sequence[int] = (),
                wait_seconds: float = PLACEMENT_WAIT_SECONDS) -> Iterator[Placement]:
        """Hold ``table``'s placement lease while the write's data moves into ``partitions``.

        Placement and an overwrite's retirement are one step per table: the rows
        an overwrite retires and the files it moves aside are the same set, and a
        write's files land where its rows say. A write that an overwrite of a later
        revision overtook (it replaced one of ``partitions`` before this write's data
        was placed, or moved this write's recorded files aside) is refused with
        :class:`WriteOvertakenError` before anything moves: placed now, its rows would
        come back into the partition the overwrite replaced, or be said to lie where
        they are not. The changes of :meth:`Placement.retire` commit on leaving, with
        the lease's release.

        An overwrite aborted on request overtakes nothing: no snapshot includes it, so
        the write is placed, and rows its retirement set on this write's files (recorded,
        not yet placed) are cleared. Unless ``merge_begun`` (a resumed write whose merge
        had begun): some of its files may have been placed and moved aside, so the
        rows cannot be trusted to be clearable and the write is refused as before.
        An overwrite (``retiring``: it has yet to retire) whose own revision was aborted
        on request is refused, :class:`AbortedOverwriteError`: nothing rolls it back, so
        placed it would leave plain reads without the partitions' old rows (its abort
        is refused once it placed: revisions/placement.py).

        The lease (revisions/placement.py) is a row taken in a short transaction: the
        block's renames hold no database lock, so the rest of the store (other tables,
        on SQLite the whole database) stays writable. Another placement of the table
        waits for it, up to ``wait_seconds`` (:class:`ConflictError` past that).

        ``adopting``: the expired revisions a recovery places the write for, to commit them
        as ``revision`` afterwards. :meth:`adopt` would refuse them when a write put files
        into one's overwritten partitions (:class:`ExpiredOverwriteOvertakenError`); asked
        here too, under the lease, no such write can place between that answer and this
        placement (whose retirement would move its files aside).
        """
        def check(uow: RevisionUnitOfWork) -> None:
            later = uow.replacements.later(table, partitions, revision, write_id)
            moved = uow.files.first_retired(table, write_id, void_too=merge_begun)
            if later or moved is not None:
                raise _overtaken(table, revision, write_id, later, moved)
            if retiring:
                refuse_aborted_overwrite(uow, table, revision, write_id)
            if adopting:
                refuse_placed_over(uow.session, table, adopting, also=[revision])
            uow.files.unretire(table, write_id)  # only a void overwrite moved any
            # Lasts past this lease: an abort is refused once files may have moved.
            placement_began(uow, table, revision, write_id, self.manager.clock(),
                            retiring=retiring)

        lease = PlacementLease.take(self.manager.engine, self.manager.clock, table, write_id,
                                    check, seconds=self.lease_seconds,
                                    wait_seconds=wait_seconds)
        place = Placement(self, lease, table, revision, write_id)
        try:
            yield place
        except BaseException:
            lease.release(None)
            raise
        lease.release(place.commit)

    @contextmanager
    def returning(self, table: str, revision: int, write_id: str, partitions: Sequence[str],
                  ) -> Iterator[Callable[[str, str], str | None]]:
        """Under ``table``'s placement lease, where a refused overwrite's moved files go.

        An overwrite cut short moved old files into its ``_pn_retired/<write_id>``
        without rows; refused since (a later overwrite took the partition), those files
        must go where the rows say they are, or no retention ever finds them. Yields
        ``home(partition, name)``: the file's row's ``retired_to`` (None: the partition
        itself), or for a file no row names the first later overwrite's folder of the
        partition (None: none), as that overwrite would have moved it."""
        lease = PlacementLease.take(self.manager.engine, self.manager.clock, table, write_id,
                                    lambda uow: None, seconds=self.lease_seconds)
        try:
            with self._uow(write=False) as uow:
                rows = {r.path: r.retired_to for r in uow.files.in_partitions(table, partitions)}
                first: dict[str, str] = {}
                for r in reversed(uow.replacements.later(table, partitions, revision, write_id)):
                    first[r.partition] = r.retired_to

            def home(partition: str, name: str) -> str | None:
                path = f"{partition}/{name}"
                return rows[path] if path in rows else first.get(partition)

            yield home
        finally:
            lease.release(None)

    def visible(self, table: str, snapshot: Snapshot, family: str = DEFAULT_FAMILY) -> list[str]:
        """Paths (relative to the table location) of the files ``snapshot`` covers.

        :class:`SnapshotFilesRemovedError` if housekeeping deleted any of them
        (revisions/vacuum.py): a partial list would read fewer rows without a word.
        """
        limit = snapshot.revision(family)
        with self._uow(write=False) as uow:  # rows expire when it ends: use them inside
            rows = visible_rows(uow.files.up_to(table, limit),
                                uow.replacements.up_to(table, limit), snapshot, family)
            removed = [r for r in rows if r.removed_at is not None]
            if removed:
                raise _removed(table, limit, removed, len(rows))
            return sorted(r.path for r in rows)

    def check_readable(self, table: str, snapshot: Snapshot) -> None:
        """:class:`SnapshotFilesRemovedError` if a file ``snapshot`` covers was deleted."""
        for family in snapshot.revisions:
            self.visible(table, snapshot, family)

    # -- revisions ----------------------------------------------------------------
    def transaction(self, table: str, revision: int) -> tuple[State, WriteTransaction | None]:
        """The state of a revision, with its transaction while it runs."""
        now = self.manager.clock()
        with self._uow(write=False) as uow:
            last = uow.revisions.last_revision(table)
            if last is None or not 1 <= revision <= last:
                raise NotFoundError(f"table {table} has no transaction {revision}")
            row = uow.revisions.get_txn(table, revision)
            if row is None:
                return "committed", None
            if row.state == ABORTED:
                return ("expired" if row.reason == "expired" else "aborted"), None
            if row.expires_at <= now:
                return "expired", None
            return "running", WriteTransaction._of(row)

    def discard(self, table: str, revision: int, write_id: str, *, abort: bool) -> State:
        """A write refused before it placed (overtaken, or aborted on request) is
        discarded: its placement record goes (a merge begun before a crash never
        finishes now: what it moved, the later overwrite moved aside) and, with
        ``abort``, its revision is aborted if it runs. Returns the revision's state
        before. One database transaction."""
        with self._uow(write=True) as uow:
            uow.revisions.lock_table(table, 0.0, create=False)  # the order a placement takes
            placement_done(uow.session, table, write_id)
            row = uow.revisions.get_txn(table, revision)
            now = self.manager.clock()
            if row is None:
                return "committed"
            if row.state == ABORTED:
                return "expired" if row.reason == "expired" else "aborted"
            if row.expires_at <= now:
                return "expired"  # settle may adopt it: not this write's to abort
            if abort:
                self.manager.abort_in(uow, WriteTransaction._of(row))
        return "running"

    def settle(self, tx: WriteTransaction, *, table_id: int | None) -> int:
        """Commit ``tx``; if it expired, adopt its revision into a new committed one.

        Returns the committed revision. A transaction aborted on request stays
        aborted: :class:`ConflictError`.
        """
        try:
            self.manager.commit_write_transaction(tx)
            return tx.revision
        except ConflictError:
            state, _ = self.transaction(tx.table, tx.revision)
            if state != "expired":
                raise
        new = self.adopt(tx.table, [tx.revision], table_id=table_id)
        log.warning("transaction %d on %s expired before it could commit; its data and "
                    "partitions now belong to committed revision %d", tx.revision, tx.table, new)
        return new

    def check_adoptable(self, table: str, old: Sequence[int]) -> None:
        """:class:`ExpiredOverwriteOvertakenError` if :meth:`adopt` would refuse ``old``
        now: for a recovery to ask before it places anything (revisions/adoption.py)."""
        with self._uow(write=False) as uow:
            refuse_placed_over(uow.session, table, old)

    def adopt(self, table: str, old: Sequence[int], *, table_id: int | None,
              into: WriteTransaction | None = None, checked: bool = False) -> int:
        """Re-tag everything of the revisions ``old`` with ``into`` (default: a new
        transaction) and commit it, all in one database transaction. Refused
        (:class:`ExpiredOverwriteOvertakenError`, nothing changed) when one of them placed
        an overwrite a later write put files into or replaced, unless the caller
        ``checked`` that itself (housekeeping's ``adopt_placed``, which keeps it)."""
        with self._uow(write=True) as uow:
            tx = into or self.manager.begin_in(uow, table, [DEFAULT_FAMILY])
            if not checked:
                refuse_placed_over(uow.session, table, old, also=[tx.revision])
            for revision in old:
                uow.files.retag(table, revision, tx.revision)
                uow.replacements.retag(table, revision, tx.revision)
                uow.files.retag_placing(table, revision, tx.revision)
                if table_id is not None:
                    uow.partitions.retag(table_id, revision, tx.revision)
            refusal = self.manager.commit_in(uow, tx)
        if refusal is not None:
            raise refusal
        return tx.revision


class Placement:
    """A write's placement under its table's lease (:meth:`RevisionFiles.placing`)."""

    def __init__(self, files: RevisionFiles, lease: PlacementLease, table: str, revision: int,
                 write_id: str) -> None:
        self.files, self.lease = files, lease
        self.table, self.revision, self.write_id = table, revision, write_id
        self._retired: tuple[list[str], str] | None = None

    def retire(self, partitions: Sequence[str], retired_to: str) -> set[str]:
        """The write (an overwrite) replaces ``partitions``; their older files move under
        ``retired_to``. Returns the paths (``<partition>/<name>``) that must stay: the
        write's own files and those of later revisions (begun after this overwrite,
        placed before it), which every snapshot from their revision on reads there.

        The rows are written when the placement ends (the lease's release): no other
        placement of the table runs meanwhile, so the files in ``partitions`` are the
        ones read here."""
        self._retired = (list(partitions), retired_to)
        with self.files._uow(write=False) as uow:
            return set(uow.files.staying(self.table, partitions, self.write_id,
                                         self.revision))

    def commit(self, uow: RevisionUnitOfWork) -> None:
        """Record the retirement (if any) in the lease's releasing transaction."""
        placement_done(uow.session, self.table, self.write_id)
        if self._retired is None:
            return
        (partitions, retired_to), table, write_id = self._retired, self.table, self.write_id
        if not uow.replacements.has_write(table, write_id):
            uow.replacements.add_many([
                {"table_name": table, "revision": self.revision, "write_id": write_id,
                 "partition": p, "retired_to": retired_to} for p in partitions])
        uow.files.retire(table, partitions, write_id, retired_to, self.revision)


def _overtaken(table: str, revision: int, write_id: str, later: list[RevisionReplacementRow],
               moved: RevisionFileRow | None) -> WriteOvertakenError:
    if later:
        first = later[0]
        what = (f"revision {first.revision} (write {first.write_id}) overwrote partition "
                f"{first.partition}" + (f" and {len(later) - 1} more" if len(later) > 1 else "")
                + " after this write began and before its data was placed")
    else:
        assert moved is not None
        what = (f"an overwrite moved its recorded file {moved.path} aside before its data "
                "was placed")
    return WriteOvertakenError(
        f"write {write_id} to {table} at revision {revision} was overtaken: {what}. Placed "
        "now, its rows would be back in a partition the overwrite replaced; nothing of it "
        "was placed (a revision the write began is aborted; one passed to write() is the "
        "caller's to abort). Write it again to add its rows on top of the overwrite")


def _removed(table: str, revision: int, removed: list[RevisionFileRow],
             total: int) -> SnapshotFilesRemovedError:
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(removed[0].removed_at or 0.0))
    days = RETIRED_FILE_RETENTION_SECONDS / 86400
    return SnapshotFilesRemovedError(
        f"the snapshot at revision {revision} of {table} cannot be read: {len(removed)} of "
        f"its {total} data files (first {removed[0].path}, at {when}) were removed by "
        "serve's housekeeping once PN_RETIRED_FILE_RETENTION_SECONDS (default "
        f"{days:g} days) had passed since the overwrite that replaced them committed; "
        "read a later snapshot, or raise the setting to keep older snapshots readable")


def visible_paths(files: Iterable[RevisionFileRow], replaced: Iterable[RevisionReplacementRow],
                  snapshot: Snapshot, family: str = DEFAULT_FAMILY) -> list[str]:
    """Paths of :func:`visible_rows`, sorted."""
    return sorted(f.path for f in visible_rows(files, replaced, snapshot, family))


def visible_rows(files: Iterable[RevisionFileRow], replaced: Iterable[RevisionReplacementRow],
                 snapshot: Snapshot, family: str = DEFAULT_FAMILY) -> list[RevisionFileRow]:
    """Files of covered revisions not hidden by a covered overwrite of their partition.

    Visibility follows revision order, the order snapshots are defined in: a
    file of revision ``r`` in partition ``p`` is hidden exactly when a covered
    revision above ``r`` replaced ``p``.
    """
    latest: dict[str, int] = {}
    for r in replaced:
        if snapshot.includes(r.revision, family):
            latest[r.partition] = max(latest.get(r.partition, 0), r.revision)
    return [f for f in files
            if snapshot.includes(f.revision, family) and f.revision >= latest.get(f.partition, 0)]


__all__ = ["Placement", "RevisionFiles", "State", "visible_paths", "visible_rows"]
