"""Real writers for tests/lakehouse: pyiceberg on a SQL catalog, delta-rs on a directory,
and what the store logged for a table."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from partition_notify.contract import (
    AddPartitionMessage,
    CommitsMissedMessage,
    SetDoneMessage,
    decode,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

    from partition_notify.app import App


@dataclass(frozen=True)
class Logged:
    """One logged message, reduced to what the assertions compare."""

    kind: str  # "add", "done" or "missed"
    #: A partition, a set-done's spec, or the afterRevision of a COMMITS_MISSED.
    spec: str
    revision: int | None


def logged(app: App, table: str, after: int = 0) -> list[Logged]:
    """The messages of ``table`` (``db.name``) in the log after event ``after``, in order."""
    out: list[Logged] = []
    for event in app.store.log.events_after(after, 10_000):
        msg = decode(event.body, {k: str(v) for k, v in event.headers.items()})
        if f"{msg.db}.{msg.table}" != table:
            continue
        if isinstance(msg, AddPartitionMessage):
            (part,) = msg.partitions
            out.append(Logged("add", "/".join(f"{k}={v}" for k, v in part.items()),
                              msg.revision))
        elif isinstance(msg, CommitsMissedMessage):
            out.append(Logged("missed", str(msg.after_revision), msg.revision))
        else:
            assert isinstance(msg, SetDoneMessage)
            out.append(Logged("done", msg.spec, msg.revision))
    return out


def catalog_env(name: str, uri: str, warehouse: Path) -> dict[str, str]:
    """The ``PN_ICEBERG_CATALOG__<NAME>__*`` variables of a SQL catalog."""
    prefix = f"PN_ICEBERG_CATALOG__{name.upper()}__"
    return {f"{prefix}TYPE": "sql", f"{prefix}URI": uri,
            f"{prefix}WAREHOUSE": warehouse.as_uri()}


def iceberg_table(catalog: Catalog, identifier: str = "sales.orders") -> Table:
    """``sales.orders`` partitioned by day(ts) as ``datestamp_day`` and identity(region)."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform, IdentityTransform
    from pyiceberg.types import DateType, LongType, NestedField, StringType

    catalog.create_namespace_if_not_exists(identifier.split(".")[0])
    schema = Schema(NestedField(1, "ts", DateType(), required=False),
                    NestedField(2, "region", StringType(), required=False),
                    NestedField(3, "v", LongType(), required=False))
    spec = PartitionSpec(PartitionField(1, 1000, DayTransform(), "datestamp_day"),
                         PartitionField(2, 1001, IdentityTransform(), "region"))
    return catalog.create_table(identifier, schema, partition_spec=spec)


def rows(table: Table, *data: tuple[str, str, int]) -> pa.Table:
    """Rows of ``(YYYY-MM-DD, region, v)`` for ``iceberg_table``."""
    import datetime as dt

    import pyarrow as pa

    return pa.Table.from_pylist(
        [{"ts": dt.date.fromisoformat(d), "region": r, "v": v} for d, r, v in data],
        schema=table.schema().as_arrow())


def rewrite(table: Table, properties: dict[str, str] | None = None) -> None:
    """A compaction: every data file replaced by one new file, operation ``replace``
    (what Spark's ``rewrite_data_files`` commits), through pyiceberg's own producer;
    ``properties``: the snapshot's summary properties."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files
    from pyiceberg.table.snapshots import Operation, Summary
    from pyiceberg.table.update.snapshot import _OverwriteFiles

    class Rewrite(_OverwriteFiles):
        # pyiceberg computes summaries for append/overwrite/delete only: compute an
        # overwrite's, then name the operation what a compaction commits.
        def _summary(self, snapshot_properties: Any = None) -> Summary:
            summary = super()._summary(snapshot_properties or {})
            return Summary(Operation.REPLACE, **summary.additional_properties)

    old = [task.file for task in table.scan().plan_files()]
    data = table.scan().to_arrow()
    with table.transaction() as tx:
        producer = Rewrite(operation=Operation.OVERWRITE, transaction=tx, io=table.io,
                           branch="main", snapshot_properties=properties or {})
        with producer as rewrite_files:
            for f in old:
                rewrite_files.delete_data_file(f)
            for f in _dataframe_to_data_files(tx.table_metadata, df=data, io=table.io):
                rewrite_files.append_data_file(f)


def delta_rows(*data: tuple[str, str, int]) -> Any:
    import pyarrow as pa

    return pa.Table.from_pylist([{"datestamp": d, "region": r, "v": v} for d, r, v in data])
