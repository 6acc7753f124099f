"""Whether an expired overwrite may still be committed as a new revision.

An overwrite that placed its files and then expired is committed afterwards as a new,
higher revision (``RevisionFiles.adopt``: its writer's ``settle``, its recovery,
housekeeping's ``adopt_placed``). Visibility follows revision order, so above a write
of a later revision that put files into (or replaced) one of its partitions it would
hide that write's rows from every later snapshot. Such an adoption is refused: the
caller-driven paths raise :class:`ExpiredOverwriteOvertakenError`, housekeeping keeps
the revision and logs it (revisions/retention.py).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from partition_notify.revisions.schema import RevisionFileRow, RevisionReplacementRow
from sqlalchemy import select
from sqlalchemy.orm import Session

from partition_notify.core.errors import ExpiredOverwriteOvertakenError


def placed_over(session: Session, table: str, revision: int, writes: Collection[str],
                ) -> set[int]:
    """The later revisions whose writes (other than ``writes``) put files into (or
    replaced) a partition the overwrite at ``revision`` replaced."""
    f, r = RevisionFileRow, RevisionReplacementRow
    mine = select(r.partition).where(r.table_name == table, r.revision == revision)
    found: set[int] = set()
    for row in (f, r):
        found.update(int(v) for v in session.scalars(select(row.revision).distinct().where(
            row.table_name == table, row.partition.in_(mine), row.revision > revision,
            row.write_id.not_in(list(writes)))))
    return found


def refuse_placed_over(session: Session, table: str, old: Sequence[int],
                       also: Collection[int] = ()) -> None:
    """:class:`ExpiredOverwriteOvertakenError` if one of the revisions ``old`` placed an
    overwrite some later write put files into or replaced (the revisions ``old`` and
    ``also``, the one they are adopted into, are not such writes; nor is a write of a
    revision above ``also``: it stays above the adopted overwrite, which hides nothing
    of it, and a placement at ``also`` keeps its files where they are)."""
    r, f = RevisionReplacementRow, RevisionFileRow
    mine = set(old) | set(also)
    ceiling = max(also, default=None)
    for revision in sorted(old):
        writes = sorted(set(session.scalars(select(r.write_id).where(
            r.table_name == table, r.revision == revision))))
        if not writes:
            continue  # not an overwrite that placed: it hides nothing
        later = sorted(v for v in placed_over(session, table, revision, writes) - mine
                       if ceiling is None or v < ceiling)
        if not later:
            continue
        mine_parts = select(r.partition).where(r.table_name == table, r.revision == revision)
        rows = [wp for row in (f, r) for wp in session.execute(select(
            row.write_id, row.partition).where(row.table_name == table,
                                               row.revision == later[0],
                                               row.partition.in_(mine_parts)))]
        write, partition = sorted((str(w), str(p)) for w, p in rows)[0]
        more = f" (and {len(later) - 1} later revision(s) more)" if len(later) > 1 else ""
        raise ExpiredOverwriteOvertakenError(
            f"revision {revision} of {table} (write {', '.join(writes)}) placed its "
            f"overwrite and expired; revision {later[0]} (write {write}) put files into or "
            f"replaced its partition {partition} since{more}. Committed as a new revision "
            "above that write it would hide its rows (visibility follows revision order), "
            f"so it is not committed: revision {revision} stays expired, its files and rows "
            "kept. Write the partitions again, then delete its files and "
            f"_pn_retired/{writes[0]} by hand")


__all__ = ["placed_over", "refuse_placed_over"]
