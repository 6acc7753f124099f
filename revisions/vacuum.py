"""Deleting the data files no snapshot needs any more (``serve``'s housekeeping).

Two kinds, both named by ``pn_revision_files`` rows (revisions/files.py):

* retired files: an overwrite moved them to ``<partition>/_pn_retired/<write_id>/``
  so snapshots pinned before it still read them. They are deleted
  ``PN_RETIRED_FILE_RETENTION_SECONDS`` after the overwrite committed
  (``pn_revision_replacements.committed_at``), like Delta's VACUUM; their rows
  stay with ``removed_at`` set, so a snapshot that lists them fails
  (:class:`SnapshotFilesRemovedError`) instead of reading fewer rows.
* an aborted write's files: deleted just before revisions/retention.py purges
  its rows, so the record exists when the files go.

The rows are not trusted: a file is deleted only if its path, built from the
row, lies inside the table's location in the directory it must be in
(``<partition>/`` or ``<partition>/_pn_retired/<write_id>/``). Every directory
below the location is opened without following symlinks, ``..``, absolute
paths and empty components are refused, and only a file (or symlink itself)
is unlinked, never a directory. A refused row is logged once and never
tried again. A failed deletion is logged once and retried on later passes,
at most ``MAX_REMOVE_ATTEMPTS`` times; then it is logged again and given up
(the file stays; an aborted write's rows are purged). A file already gone
counts as removed. ``serve`` deletes in local locations (``/x``, ``file:/x``:
:class:`LocalFiles`); elsewhere (``hdfs://``, ``s3a://``) a Spark job does, through
the location's Hadoop FileSystem (writers/vacuum.py), and ``serve`` leaves those
tables' rows to it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from partition_notify.revisions.schema import (
    RevisionFileRow,
    RevisionReplacementRow,
    RevisionTableRow,
)
from partition_notify.store.housekeeping import BetweenBatches, in_batches
from partition_notify.store.uow import UnitOfWork
from sqlalchemy import and_, select, tuple_, update

log = logging.getLogger(__name__)

#: Directory of a partition that an overwrite moves the files it replaces into.
RETIRED_DIR = "_pn_retired"
#: Failed deletions of one file before it is given up (one try per housekeeping pass).
MAX_REMOVE_ATTEMPTS = 30
Outcome = Literal["removed", "gone", "refused", "failed"]


class TableFiles(Protocol):
    """One table location's files. ``dirs``: the directories below the location,
    each one checked entry (:func:`expected_dirs`); ``name``: one checked entry."""

    def remove(self, dirs: list[str], name: str) -> Outcome:
        """Delete the file (never a directory); :class:`ValueError`: refused."""

    def drop_empty(self, dirs: list[str]) -> None:
        """Remove the directory ``dirs`` if it is empty; nothing else."""


#: A revision table's files, or None: not this remover's to delete (unknown, elsewhere).
Roots = Callable[[str], TableFiles | None]


@dataclass(frozen=True)
class LocalFiles:
    """A local table directory: every directory below it opened without following links."""

    root: Path

    def remove(self, dirs: list[str], name: str) -> Outcome:
        return remove_in(self.root, dirs, name)

    def drop_empty(self, dirs: list[str]) -> None:
        if any(self.root.joinpath(*dirs[:i]).is_symlink() for i in range(1, len(dirs) + 1)):
            return
        with contextlib.suppress(OSError):  # not empty, or gone: rmdir removes nothing else
            self.root.joinpath(*dirs).rmdir()


@dataclass
class FileRemover:
    """Deletes the files rows name, within their tables' locations."""

    roots: Roots
    #: Files deleted (not counting ones already gone), for the housekeeping metric.
    removed: int = 0
    _root_of: dict[str, TableFiles | None] = field(default_factory=dict)

    def root(self, table: str) -> TableFiles | None:
        if table not in self._root_of:  # one pass: a few tables, looked up once
            self._root_of[table] = self.roots(table)
        return self._root_of[table]

    def settle(self, rows: Iterable[RevisionFileRow],
               expected: Callable[[RevisionFileRow], list[str]], now: float) -> bool:
        """Delete each row's file; mark the rows; True when none is left to retry."""
        done = True
        for row in rows:
            root = self.root(row.table_name)
            if root is None:
                continue  # not ours to delete: the rows are left as they are
            outcome, reason = self._remove(root, row, expected)
            done = self._mark(row, outcome, reason, now) and done
        return done

    def _remove(self, root: TableFiles, row: RevisionFileRow,
                expected: Callable[[RevisionFileRow], list[str]]) -> tuple[Outcome, str]:
        try:
            dirs = expected(row)
            return root.remove(dirs, _component(row.name, "file name")), ""
        except ValueError as exc:
            return "refused", str(exc)
        except OSError as exc:
            return "failed", f"{type(exc).__name__}: {exc.strerror or exc}"

    def _mark(self, row: RevisionFileRow, outcome: Outcome, reason: str, now: float) -> bool:
        where = f"{row.table_name} revision {row.revision} file {row.path!r}"
        if outcome in ("removed", "gone"):
            row.removed_at = now
            self.removed += outcome == "removed"
            return True
        if outcome == "refused":
            row.remove_failures = MAX_REMOVE_ATTEMPTS
            log.warning("refused to delete %s: %s; nothing deleted", where, reason,
                        extra={"pn_event": "revision_files.refused"})
            return True
        row.remove_failures += 1
        if row.remove_failures >= MAX_REMOVE_ATTEMPTS:
            log.error("giving up deleting %s after %d attempts (%s); the file stays",
                      where, row.remove_failures, reason,
                      extra={"pn_event": "revision_files.given_up"})
            return True
        if row.remove_failures == 1:  # once: later passes retry quietly
            log.warning("could not delete %s (%s); retried at each housekeeping pass, "
                        "%d times at most", where, reason, MAX_REMOVE_ATTEMPTS,
                        extra={"pn_event": "revision_files.failed"})
        return False


def _component(part: str, what: str) -> str:
    """``part`` if it names one entry of a directory, else :class:`ValueError` (refused)."""
    if part in ("", ".", "..") or "/" in part or "\0" in part:
        raise ValueError(f"its {what} {part!r} is not one directory entry")
    return part


def expected_dirs(partition: str, retired_to: str | None) -> list[str]:
    """The directories, below the table location, a file of ``partition`` must be in
    (``retired_to``: moved there by an overwrite), else :class:`ValueError` (refused)."""
    if partition.startswith("/"):
        raise ValueError(f"its partition {partition!r} is an absolute path")
    dirs = [_component(p, "partition directory") for p in partition.split("/")]
    return dirs if retired_to is None else dirs + retired_dirs(retired_to)


def retired_dirs(retired_to: str) -> list[str]:
    """``_pn_retired/<write_id>`` as its two components, else :class:`ValueError` (refused)."""
    parts = retired_to.split("/")
    if len(parts) != 2 or parts[0] != RETIRED_DIR:
        raise ValueError(f"it was moved to {retired_to!r}, not {RETIRED_DIR}/<write id>")
    return [parts[0], _component(parts[1], "write id")]


def remove_in(root: Path, dirs: list[str], name: str) -> Outcome:
    """Unlink ``root/dirs.../name``, opening each directory below ``root`` without
    following a symlink (a symlinked directory is refused: it may lead out)."""
    try:
        fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY)]
    except FileNotFoundError:
        return "gone"  # the whole table directory is
    try:
        for part in dirs:
            try:
                fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                   dir_fd=fds[-1]))
            except FileNotFoundError:
                return "gone"
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise ValueError(f"{part!r} below the table location is not a directory "
                                  "(a symlink is not followed)") from None
                raise
        try:
            mode = os.stat(name, dir_fd=fds[-1], follow_symlinks=False).st_mode
        except FileNotFoundError:
            _remove_checksum(fds[-1], name)  # deleted by hand, its checksum left behind
            return "gone"
        if stat.S_ISDIR(mode):
            raise ValueError(f"{name!r} is a directory; only files are deleted")
        os.unlink(name, dir_fd=fds[-1])
        _remove_checksum(fds[-1], name)
        return "removed"
    finally:
        for fd in reversed(fds):
            os.close(fd)


def _remove_checksum(dir_fd: int, name: str) -> None:
    """Hadoop's local filesystem keeps a checksum ``.<name>.crc`` beside each file it
    writes and moves it with the file: it goes with the file, else the emptied
    ``_pn_retired/<write_id>`` directory stays forever. Only a regular file."""
    crc = f".{name}.crc"
    try:
        if stat.S_ISREG(os.stat(crc, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            os.unlink(crc, dir_fd=dir_fd)
    except OSError:
        pass  # absent, or not ours to force: the data file is what counts


def remove_retired(write_uow: Callable[[], UnitOfWork], remover: FileRemover, now: float,
                   before: float, *, batch_size: int,
                   between_batches: BetweenBatches | None = None) -> int:
    """Delete the files of overwrites that committed before ``before``; returns how
    many overwritten partitions were dealt with. Batches walk (committed_at, id)."""
    with write_uow() as uow:
        _date_old_commits(uow, now)
        # Only the tables this remover deletes in: the others' rows stay for theirs
        # (a Spark job's for hdfs://, s3a://), and are not read at every pass.
        names = uow.session.scalars(select(RevisionTableRow.table_name)).all()
        mine = [name for name in names if remover.root(name) is not None]
    after: list[tuple[float, int]] = []
    done = [0]

    def batch(uow: UnitOfWork, n: int) -> int:
        r = RevisionReplacementRow
        where = and_(r.vacuumed_at.is_(None), r.committed_at < before,
                     r.table_name.in_(mine))
        if after:
            where = and_(where, tuple_(r.committed_at, r.id) > tuple_(*after[-1]))
        rows = list(uow.session.scalars(select(r).where(where)
                                        .order_by(r.committed_at, r.id).limit(n)))
        if rows:
            after.append((float(rows[-1].committed_at or 0.0), rows[-1].id))
        for rep in rows:
            root = remover.root(rep.table_name)
            if root is not None and remover.settle(_retired_files(uow, rep),
                                                   _retired_expected(rep), now):
                rep.vacuumed_at = now
                done[0] += 1
                _drop_empty(root, rep)
        return len(rows)

    if mine:
        in_batches(write_uow, batch, batch_size=batch_size, between_batches=between_batches)
    return done[0]


def _retired_files(uow: UnitOfWork, rep: RevisionReplacementRow) -> list[RevisionFileRow]:
    """The files ``rep`` hid: of lower revisions (a higher one's file is not hidden by
    it, wherever its row says it lies: the latest snapshot may list it)."""
    f = RevisionFileRow
    return list(uow.session.scalars(select(f).where(
        f.table_name == rep.table_name, f.partition == rep.partition,
        f.retired_to == rep.retired_to, f.revision < rep.revision, f.removed_at.is_(None),
        f.remove_failures < MAX_REMOVE_ATTEMPTS).order_by(f.id)))


def _retired_expected(rep: RevisionReplacementRow) -> Callable[[RevisionFileRow], list[str]]:
    def expected(row: RevisionFileRow) -> list[str]:
        dirs = expected_dirs(row.partition, row.retired_to)
        if dirs[-1] != rep.write_id:  # the overwrite that moved it, nothing else
            raise ValueError(f"it was moved to {row.retired_to!r}, not by write {rep.write_id}")
        return dirs
    return expected


def _drop_empty(root: TableFiles, rep: RevisionReplacementRow) -> None:
    """Remove ``_pn_retired/<write_id>`` and ``_pn_retired`` once empty."""
    try:
        dirs = expected_dirs(rep.partition, rep.retired_to)
    except ValueError:
        return
    root.drop_empty(dirs)
    root.drop_empty(dirs[:-1])


def _date_old_commits(uow: UnitOfWork, now: float) -> None:
    """Rows written before 0017 have no commit time: their retention starts now,
    once their overwrite is committed (no transaction row left, revision allocated)."""
    from partition_notify.revisions.schema import RevisionTxnRow

    r, t, c = RevisionReplacementRow, RevisionTxnRow, RevisionTableRow
    open_txn = select(t.revision).where(t.table_name == r.table_name, t.revision == r.revision)
    allocated = select(c.last_revision).where(c.table_name == r.table_name).scalar_subquery()
    uow.session.execute(update(r).where(
        r.committed_at.is_(None), r.vacuumed_at.is_(None), ~open_txn.exists(),
        r.revision <= allocated).values(committed_at=now))


__all__ = ["MAX_REMOVE_ATTEMPTS", "RETIRED_DIR", "FileRemover", "LocalFiles", "Roots",
           "TableFiles", "expected_dirs", "remove_retired"]
