"""What ``partition-notify rev ...`` calls: plain arguments in, JSON-ready dicts out.

A transaction begun by one command is finished by another (another process),
so commands name it by table and revision rather than by a handle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from partition_notify.revisions import RevisionManager, WriteTransaction
from partition_notify.revisions.files import RevisionFiles
from partition_notify.revisions.model import table_name


def _handle(table: str, revision: int) -> WriteTransaction:
    # commit/abort/keep_alive only use the table and the revision of a handle.
    return WriteTransaction(table_name(table), revision, (), 1.0, 0.0, 0.0)


def begin(
    rm: RevisionManager, table: str, families: Sequence[str], keep_alive: float | None = None
) -> dict[str, Any]:
    """``rev begin <table> [--families a,b] [--keep-alive-seconds s]``: the new transaction."""
    return rm.begin_write_transaction(table, families, keep_alive).to_dict()


def commit(rm: RevisionManager, table: str, revision: int) -> dict[str, Any]:
    """``rev commit <table> <revision>``."""
    rm.commit_write_transaction(_handle(table, revision))
    return {"table": table, "revision": revision, "state": "committed"}


def abort(rm: RevisionManager, table: str, revision: int) -> dict[str, Any]:
    """``rev abort <table> <revision>``."""
    rm.abort_write_transaction(_handle(table, revision))
    return {"table": table, "revision": revision, "state": "aborted"}


def keep_alive(
    rm: RevisionManager, table: str, revision: int, seconds: float | None = None
) -> dict[str, Any]:
    """``rev keep-alive <table> <revision> [--keep-alive-seconds s]``: the new deadline."""
    return rm.keep_alive(_handle(table, revision), seconds).to_dict()


def snapshot(rm: RevisionManager, table: str, revision: int | None = None) -> dict[str, Any]:
    """``rev snapshot <table> [--revision n]``: pass the output to jobs as-is.

    A snapshot whose data files housekeeping deleted is refused here, where the
    job is planned, rather than in the job that reads it."""
    snap = rm.create_snapshot(table, revision)
    if revision is not None:  # the latest never covers a deleted file
        RevisionFiles(rm).check_readable(snap.table, snap)
    return snap.to_dict()


def status(rm: RevisionManager, table: str) -> dict[str, Any]:
    """``rev status <table>``: latest snapshot, running and aborted transactions."""
    return {
        "snapshot": rm.create_snapshot(table).to_dict(),
        "running": [t.to_dict() for t in rm.running_transactions(table)],
        "aborted": rm.aborted_revisions(table),
    }


def tables(rm: RevisionManager) -> list[str]:
    """``rev tables``."""
    return rm.tables()


__all__ = ["abort", "begin", "commit", "keep_alive", "snapshot", "status", "tables"]
