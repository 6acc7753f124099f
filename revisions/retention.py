"""Retention of aborted write transactions (``serve``'s housekeeping).

An aborted transaction keeps a row so that snapshots leave its revision out
(``Snapshot.aborted``): its data is not rolled back. Every snapshot read
lists those rows, so they cannot stay for ever. A revision nothing is tagged
with any more reads, to every snapshot (the latest, one pinned at an older
revision, one handed out as JSON before), exactly like an empty committed
one. So once an aborted transaction ended ``PN_REVISION_ABORT_RETENTION_SECONDS``
ago, the purge deletes, in one database transaction per batch:

* the ``pn_revision_files`` and ``pn_revision_replacements`` rows of its
  revision (no snapshot lists them: the revision is aborted), then
* its ``pn_revision_txns`` row,

except when an announced partition (``pn_partitions``) still carries that
revision: ``snapshot_partitions`` must go on leaving the partition out, so
that row stays until a later announcement of the partition replaces it
(one per partition at most: bounded by the catalog).

What the purge gives up: ``rev status`` / ``transaction()`` of a purged
revision says "committed", and a writer that stalled longer than the
retention with an aborted transaction in hand could commit it. The default
(30 days, as long as a Spark job id is remembered) is far beyond any
keep-alive; a write recovered later than that is announced again anyway.
Just before its rows go, the data files the rows name are deleted
(revisions/vacuum.py: local table locations, only inside the table's
location; a revision whose file could not be deleted keeps its rows until a
later pass deletes it or gives up), and not while a placement of the table holds its
lease (revisions/placement.py ``placing_now``: skipped that pass, done at a later one).
Elsewhere (``hdfs://``) a Spark job's ``vacuum_retired`` deletes them earlier, keeping
the rows (:func:`remove_aborted_files`).

An aborted revision that placed an overwrite is different: its files are the
partitions' data in plain reads, the old ones lie in ``_pn_retired``, and its rows are
the only record of where they went. Neither the purge nor the Spark job deletes its
files or rows (logged each pass, ``revision_purge.placed_kept``). One that *expired*
(its writer died after placing, nobody ran its recovery) is recovered first, as its
recovery would have: :func:`adopt_placed` commits it as a new revision (what a
writer's ``settle`` does with an expired revision), so snapshots read what plain reads
read and its retired files go ``PN_RETIRED_FILE_RETENTION_SECONDS`` after that commit
(logged, ``revision_purge.adopted``; its partitions are announced only if its recovery
runs) — unless a write of a later revision put files into (or replaced) one of its
partitions since: committed above it, the overwrite would hide that write's rows
(visibility follows revision order; revisions/adoption.py, the check ``settle`` and
recovery make too), so it is kept and logged instead (a pass walks past those: they
never starve the rest) (a later one
that is itself such an overwrite, committed too, is committed above it: their order
stays). An overwrite
whose placement began and never finished (``pn_revision_placing`` with ``retiring``:
some files moved aside, no rows) waits for its recovery, which alone can finish the
renames (ERROR each pass, ``revision_purge.placement_unfinished``); an
append's cut short moved only its own files, which go as any aborted write's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from partition_notify.revisions.adoption import placed_over
from partition_notify.revisions.placement import placing_now
from partition_notify.revisions.schema import (
    ABORTED,
    RevisionFileRow,
    RevisionPlacingRow,
    RevisionReplacementRow,
    RevisionTxnRow,
)
from partition_notify.revisions.vacuum import MAX_REMOVE_ATTEMPTS, FileRemover, expected_dirs
from partition_notify.store.housekeeping import BetweenBatches, in_batches
from partition_notify.store.schema import PartitionRow, TableRow
from partition_notify.store.uow import UnitOfWork
from sqlalchemy import ColumnElement, and_, delete, exists, or_, select, tuple_
from sqlalchemy.orm import aliased

if TYPE_CHECKING:
    from partition_notify.revisions.files import RevisionFiles

log = logging.getLogger(__name__)
#: The tables a revision's rows are in, each keyed by (table_name, revision).
RevisionRow = RevisionFileRow | RevisionReplacementRow | RevisionPlacingRow | RevisionTxnRow

Key = tuple[float, str, int]
#: Expired placed overwrites :func:`adopt_placed` commits per pass at most.
ADOPT_PER_PASS = 1000


@dataclass(frozen=True, slots=True)
class Adoptions:
    """One pass of :func:`adopt_placed`: overwrites committed, and kept (logged by the purge)."""

    adopted: int
    kept: int


def adopt_placed(files: RevisionFiles, before: float, *,
                 per_pass: int = ADOPT_PER_PASS) -> Adoptions:
    """Commit, each as a new revision, the overwrites that placed their files and then
    expired before ``before`` without their recovery (see the module docstring); at
    most about ``per_pass`` each pass. One database transaction each
    (``RevisionFiles.adopt``).

    Pages of ``per_pass`` (ended_at, table, revision) walk past the kept ones (a later
    write placed over them: they never leave by themselves), so they cannot fill the
    pass and starve the rest, as the purge's batches walk past them too; kept counts
    those the pass walked past."""
    adopted = kept = 0
    after: Key | None = None
    while adopted < per_pass:
        with UnitOfWork(files.manager.engine, write=False) as uow:
            page = _expired_placed(uow, before, after, per_pass)
            plan, kept_now = _plan(uow, before, [(t, r) for _, t, r in page])
            ids = {n: _table_id(uow, n) for n in {t for t, _ in plan}}
        kept += kept_now
        # Ascending: one placed over by another such overwrite is committed below it.
        for (table, revision), write_ids in sorted(plan.items(), key=lambda kv: kv[0][1]):
            _adopt(files, table, revision, write_ids, ids[table])
            adopted += 1
        if len(page) < per_pass:
            break
        after = page[-1]
    return Adoptions(adopted=adopted, kept=kept)


def _adopt(files: RevisionFiles, table: str, revision: int, write_ids: list[str],
           table_id: int | None) -> None:
    new = files.adopt(table, [revision], table_id=table_id, checked=True)
    log.warning(
        "revision %d of %s (write %s) placed its overwrite and expired, and its "
        "recovery never ran: housekeeping commits it as revision %d rather than purge "
        "it (plain reads already read its files; the partitions' old ones in "
        "_pn_retired go PN_RETIRED_FILE_RETENTION_SECONDS from now). Its partitions "
        "were announced only if its writer logged them; its recovery (recover()) "
        "announces them", revision, table, ", ".join(write_ids), new,
        extra={"pn_event": "revision_purge.adopted"})


def _placed_expired(before: float) -> ColumnElement[bool]:
    """An expired revision ended before ``before`` that placed an overwrite (retirement
    rows) and is not placing (an unfinished placement waits for its recovery)."""
    t, r, p = RevisionTxnRow, RevisionReplacementRow, RevisionPlacingRow
    return and_(t.state == ABORTED, t.reason == "expired", t.ended_at < before,
                exists().where(r.table_name == t.table_name, r.revision == t.revision),
                ~exists().where(p.table_name == t.table_name, p.revision == t.revision))


def _expired_placed(uow: UnitOfWork, before: float, after: Key | None, n: int) -> list[Key]:
    t = RevisionTxnRow
    where = _placed_expired(before)
    if after is not None:
        where = and_(where, tuple_(t.ended_at, t.table_name, t.revision) > tuple_(*after))
    stmt = (select(t.ended_at, t.table_name, t.revision).where(where)
            .order_by(t.ended_at, t.table_name, t.revision).limit(n))
    return [(float(e or 0.0), str(name), int(v)) for e, name, v in uow.session.execute(stmt)]


def _plan(uow: UnitOfWork, before: float, page: list[tuple[str, int]],
          ) -> tuple[dict[tuple[str, int], list[str]], int]:
    """What to adopt for ``page`` (key -> its writes), and how many of ``page`` are kept.

    One is kept if a later revision placed over it that is not such an overwrite, or is
    one that is kept itself; the later ones it is not kept for are adopted with it (above
    it: adopted later in a page of their own, they would see it above them and stay)."""
    s, t = uow.session, RevisionTxnRow
    writes: dict[tuple[str, int], list[str]] = {}
    later: dict[tuple[str, int], set[tuple[str, int]]] = {}
    kept: set[tuple[str, int]] = set()
    todo = list(page)
    while todo:  # the page and the later overwrites over it, each once
        key = todo.pop()
        if key in writes:
            continue
        writes[key] = sorted(set(s.scalars(select(RevisionReplacementRow.write_id).where(
            RevisionReplacementRow.table_name == key[0],
            RevisionReplacementRow.revision == key[1]))))
        later[key] = {(key[0], v) for v in placed_over(s, *key, writes[key])}
        for other in later[key] - writes.keys():
            if s.scalar(select(t.revision).where(
                    t.table_name == other[0], t.revision == other[1], _placed_expired(before))):
                todo.append(other)
            else:
                kept.add(key)
    # Latest first: whether one is kept depends on later revisions only.
    for key in sorted(writes, key=lambda k: k[1], reverse=True):
        if later[key] & kept:
            kept.add(key)
    return ({k: w for k, w in writes.items() if k not in kept},
            sum(1 for k in page if k in kept))


def _table_id(uow: UnitOfWork, name: str) -> int | None:
    db, _, table = name.partition(".")
    return uow.session.scalar(select(TableRow.id).where(TableRow.db == db,
                                                        TableRow.name == table))


def _kept_placed(uow: UnitOfWork, keys: list[tuple[str, int]], who: str,
                 ) -> set[tuple[str, int]]:
    """Of ``keys``, the aborted revisions whose files must stay: one of their writes
    placed an overwrite (retirement rows) or began placing and never finished; each
    logged, naming the write and what resolves it."""
    if not keys:
        return set()
    s, r, p, t = uow.session, RevisionReplacementRow, RevisionPlacingRow, RevisionTxnRow
    # An append's placement cut short moved only its own files: they go as any
    # aborted write's (its record with them).
    began = {(str(n), int(v)): (str(w), float(at)) for n, v, w, at in s.execute(
        select(p.table_name, p.revision, p.write_id, p.began_at).where(
            _of(p, keys), p.retiring.is_(True)))}
    placed = {(str(n), int(v)): str(w) for n, v, w in s.execute(
        select(r.table_name, r.revision, r.write_id).where(
            _of(r, keys)))}
    reasons = {(str(n), int(v)): why for n, v, why in s.execute(
        select(t.table_name, t.revision, t.reason).where(
            _of(t, keys)))}
    for key in sorted(began.keys() | placed.keys()):
        (table, revision), why = key, reasons.get(key) or "aborted"
        if key in began:
            write, at = began[key]
            log.error(
                "revision %d of %s (%s) is kept (neither its files nor its rows deleted) by %s: "
                "write %s began placing "
                "its files at %.3f and never finished (some of the partitions' old files "
                "may lie in _pn_retired/%s, its own partly in place); its files and rows "
                "stay until its recovery places it: run recover() on the table's location "
                "(NotifyingWriter.recover)", revision, table, why, who, write, at, write,
                extra={"pn_event": "revision_purge.placement_unfinished"})
            continue
        write = placed[key]
        then = ("serve's housekeeping commits it as a new revision once "
                "PN_REVISION_ABORT_RETENTION_SECONDS passed, unless a later write placed "
                "into its partitions (committed above that write, it would hide its rows: "
                "then write the partitions again, and delete its files and "
                f"_pn_retired/{write} by hand)"
                if why == "expired" else
                "an aborted revision is not rolled back: write the partitions again, "
                f"then delete _pn_retired/{write} by hand")
        log.error(
            "revision %d of %s (%s) is kept (neither its files nor its rows deleted) by %s: "
            "write %s placed its "
            "overwrite (its files are the partitions' data in plain reads, the old ones "
            "in _pn_retired/%s); its files and rows stay: %s", revision, table, why, who,
            write, write, then, extra={"pn_event": "revision_purge.placed_kept"})
    return began.keys() | placed.keys()


def purge_aborted(write_uow: Callable[[], UnitOfWork], before: float, *, batch_size: int,
                  between_batches: BetweenBatches | None = None,
                  remover: FileRemover | None = None, now: float = 0.0) -> int:
    """Delete aborted transactions that ended before ``before`` (see the module
    docstring), their data files first with ``remover``; returns how many. Batches
    walk (ended_at, table, revision) past the rows a partition holds or a file
    still to delete, so those never stop the purge of the rest."""
    after: list[Key] = []
    deleted = [0]

    def batch(uow: UnitOfWork, n: int) -> int:
        rows = _oldest(uow, before, after[-1] if after else None, n)
        if rows:
            after.append(rows[-1])
        held = _held_by_partitions(uow, [(t, r) for _, t, r in rows])
        gone = [(t, r) for _, t, r in rows if (t, r) not in held]
        kept = _kept_placed(uow, gone, "serve's housekeeping")
        gone = [k for k in gone if k not in kept]
        if remover is not None:  # not under a placement renaming in the same table
            busy = placing_now(uow.session, [t for t, _ in gone], now)
            gone = [k for k in gone if k[0] not in busy and remover.settle(*_files(uow, k), now)]
        deleted[0] += _delete(uow, gone)
        return len(rows)

    in_batches(write_uow, batch, batch_size=batch_size, between_batches=between_batches)
    return deleted[0]


def remove_aborted_files(write_uow: Callable[[], UnitOfWork], remover: FileRemover,
                         table: str, before: float, now: float, *, batch_size: int) -> None:
    """Delete the data files of ``table``'s aborted transactions that ended before
    ``before``, keeping the rows (:func:`purge_aborted` purges them later): for a job
    that deletes where ``serve`` cannot (writers/vacuum.py). Batches walk revisions."""
    after: list[int] = []

    def batch(uow: UnitOfWork, n: int) -> int:
        t = RevisionTxnRow
        where = and_(t.state == ABORTED, t.ended_at < before, t.table_name == table)
        if after:
            where = and_(where, t.revision > after[-1])
        revisions = list(uow.session.scalars(
            select(t.revision).where(where).order_by(t.revision).limit(n)))
        if revisions:
            after.append(revisions[-1])
        if placing_now(uow.session, [table], now):
            return 0  # a placement renames in the table: the next run deletes them
        kept = _kept_placed(uow, [(table, v) for v in revisions], "the vacuum job")
        for revision in (v for v in revisions if (table, v) not in kept):
            remover.settle(*_files(uow, (table, revision)), now)
        return len(revisions)

    in_batches(write_uow, batch, batch_size=batch_size)


def _oldest(uow: UnitOfWork, before: float, after: Key | None, n: int) -> list[Key]:
    t = RevisionTxnRow
    where = and_(t.state == ABORTED, t.ended_at < before)
    if after is not None:
        where = and_(where, tuple_(t.ended_at, t.table_name, t.revision) > tuple_(*after))
    stmt = (select(t.ended_at, t.table_name, t.revision).where(where)
            .order_by(t.ended_at, t.table_name, t.revision).limit(n))
    return [(float(e or 0.0), str(name), int(r)) for e, name, r in uow.session.execute(stmt)]


def _files(uow: UnitOfWork, key: tuple[str, int],
           ) -> tuple[list[RevisionFileRow], Callable[[RevisionFileRow], list[str]]]:
    """The rows of a revision whose file is still to delete, and where each must lie.

    A path another revision's row names too is refused: deleting it could take
    committed data (a row is not trusted to name only its own write's file)."""
    f, g = RevisionFileRow, aliased(RevisionFileRow)
    rows = list(uow.session.scalars(select(f).where(
        f.table_name == key[0], f.revision == key[1], f.removed_at.is_(None),
        f.remove_failures < MAX_REMOVE_ATTEMPTS).order_by(f.id)))
    shared = set(uow.session.scalars(select(f.id).join(g, and_(
        g.table_name == f.table_name, g.partition == f.partition, g.name == f.name,
        g.revision != f.revision)).where(f.table_name == key[0], f.revision == key[1])))

    def expected(row: RevisionFileRow) -> list[str]:
        if row.id in shared:
            raise ValueError("another revision's row names the same file")
        return expected_dirs(row.partition, row.retired_to)
    return rows, expected


def _held_by_partitions(uow: UnitOfWork, keys: list[tuple[str, int]]) -> set[tuple[str, int]]:
    """The (table, revision) pairs of ``keys`` an announced partition still carries."""
    held: set[tuple[str, int]] = set()
    for name in {t for t, _ in keys}:
        db, _, table = name.partition(".")
        revisions = [r for t, r in keys if t == name]
        stmt = (select(PartitionRow.revision).join(TableRow, TableRow.id == PartitionRow.table_id)
                .where(TableRow.db == db, TableRow.name == table,
                       PartitionRow.revision.in_(revisions)))
        held.update((name, int(r)) for r in uow.session.scalars(stmt) if r is not None)
    return held


def _of(row: type[RevisionRow], keys: Sequence[tuple[str, int]]) -> ColumnElement[bool]:
    """``row``'s rows of the revisions ``keys``, per table ``table_name = ? AND revision
    IN (...)``: the (table_name, revision) index answers it. As a row-value list
    (``(table_name, revision) IN (VALUES ...)``) SQLite scanned the whole table, and
    pn_revision_files and pn_revision_replacements keep every committed revision's."""
    tables = sorted({t for t, _ in keys})
    return or_(*(and_(row.table_name == name,
                      row.revision.in_(sorted({v for t, v in keys if t == name})))
                 for name in tables))


def _delete(uow: UnitOfWork, keys: list[tuple[str, int]]) -> int:
    if not keys:
        return 0
    s = uow.session
    for row in (RevisionFileRow, RevisionReplacementRow, RevisionPlacingRow):
        s.execute(delete(row).where(_of(row, keys)))
    s.execute(delete(RevisionTxnRow).where(
        RevisionTxnRow.state == ABORTED,
        _of(RevisionTxnRow, keys)))
    return len(keys)


__all__ = ["Adoptions", "adopt_placed", "purge_aborted", "remove_aborted_files"]
