"""Spark writers that announce the partitions they create (HCatOutputFormat's role).

Quick use from a PySpark job::

    from partition_notify import NotifyingWriter
    w = NotifyingWriter(app, "sales", "orders")
    w.write(df, mode="append", mark_set_done="datestamp=20110228")
"""

from partition_notify.writers.commit import WriteResult
from partition_notify.writers.vacuum import vacuum_retired
from partition_notify.writers.writer import NotifyingWriter

from partition_notify.core.errors import CommitIncompleteError

__all__ = ["CommitIncompleteError", "NotifyingWriter", "WriteResult", "vacuum_retired"]
