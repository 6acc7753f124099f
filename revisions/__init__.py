"""Revisions of tables: write transactions, snapshots, files per revision, SNAPSHOT datasets.

Spark-free: this package keeps the bookkeeping in the SQL store (through
repositories over a Session, committed by the store's unit of work). The
Spark side (writing data, reading a snapshot's files) lives in ``writers``.
Callers get a wired :class:`RevisionManager` from the composition root
(``app.revisions``) rather than building one.
"""

from partition_notify.revisions.manager import KeepAlive, RevisionManager, snapshot_partitions
from partition_notify.revisions.model import (
    DEFAULT_FAMILY,
    DEFAULT_KEEP_ALIVE_SECONDS,
    Snapshot,
    WriteTransaction,
)

__all__ = [
    "DEFAULT_FAMILY",
    "DEFAULT_KEEP_ALIVE_SECONDS",
    "KeepAlive",
    "RevisionManager",
    "Snapshot",
    "WriteTransaction",
    "snapshot_partitions",
]
