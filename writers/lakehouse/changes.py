"""Did a followed table change since the follower last caught up with it? Answered
cheaply for many tables at once, so a thousand idle tables cost a few queries and stats
per poll, not a thousand table loads.

* Iceberg on a SQL catalog (pyiceberg's ``SqlCatalog``, the schema Spark's JDBC
  catalog writes too): the table's ``metadata_location`` from the catalog's
  ``iceberg_tables`` row, one query per catalog per batch of tables. Every Iceberg
  commit writes a new metadata file and swaps this location, so an unchanged location
  is an unchanged table. Other catalogs (REST, Glue, Hive) have no such bulk read in
  pyiceberg: their tables are loaded every poll (a REST ``loadTable`` is one GET).
* Delta: one ``get_file_info`` call per table for the next version's JSON commit and
  ``_delta_log/_last_checkpoint``. A new version always writes the next JSON file; log
  cleanup (which could remove it before we look) runs only below a checkpoint, and
  writing a checkpoint rewrites ``_last_checkpoint``: a changed ``_last_checkpoint``
  means "list the whole log" (the reader then reports a gap if there is one).

A token is what the check saw *before* the table was read: the follower remembers
(cursor, token) after a read that caught up, and skips the table while both are
unchanged. A commit landing between the check and the read changes the token seen at
the next poll, so it is read then: never skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from partition_notify.writers.lakehouse.store import Followed

if TYPE_CHECKING:
    from partition_notify.writers.lakehouse.iceberg import Catalogs

#: (namespace, name) pairs per catalog query: bounds the statement's parameters.
_CHUNK = 400


def tokens(fmt: str, tables: Sequence[Followed], catalogs: Catalogs) -> dict[int, str]:
    """table id -> what the cheap check saw; tables it cannot check cheaply are absent
    (they are read every poll). Raises what the catalog or filesystem raises."""
    if fmt == "iceberg":
        return _iceberg(tables, catalogs)
    return _delta(tables)


def must_read(f: Followed, token: str | None, seen: tuple[int | None, str] | None) -> bool:
    """Whether ``f`` may have commits after its cursor, given this poll's ``token`` and
    the (cursor, token) remembered when the follower last caught up with it."""
    if token is None or seen is None or f.cursor is None:
        return True
    return seen != (f.cursor, token)


def _iceberg(tables: Sequence[Followed], catalogs: Catalogs) -> dict[int, str]:
    out: dict[int, str] = {}
    by_catalog: dict[str, list[Followed]] = {}
    for f in tables:
        if f.catalog is not None and f.identifier is not None:
            by_catalog.setdefault(f.catalog, []).append(f)
    for name, group in by_catalog.items():
        out.update(_sql_catalog_locations(catalogs, name, group))
    return out


def _sql_catalog_locations(catalogs: Catalogs, name: str,
                           group: list[Followed]) -> dict[int, str]:
    from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
    from sqlalchemy import select, tuple_
    from sqlalchemy.orm import Session

    # Only a catalog a table read loaded already: loading one may hang (a REST
    # catalog's config call), and that belongs to the reads, under their deadlines.
    catalog = catalogs.loaded(name)
    if not isinstance(catalog, SqlCatalog):
        return {}
    # A catalog table may be registered more than once (other keys, another topic):
    # every registration of it gets the catalog's answer.
    ids: dict[tuple[str, str], list[int]] = {}
    for f in group:
        assert f.identifier is not None
        namespace, _, table = f.identifier.rpartition(".")
        ids.setdefault((namespace, table), []).append(f.table_id)
    out: dict[int, str] = {}
    keys = list(ids)
    t = IcebergTables
    with Session(catalog.engine) as session:
        for i in range(0, len(keys), _CHUNK):
            stmt = select(t.table_namespace, t.table_name, t.metadata_location).where(
                t.catalog_name == catalog.name,
                tuple_(t.table_namespace, t.table_name).in_(keys[i:i + _CHUNK]))
            for namespace, table, location in session.execute(stmt):
                for table_id in ids[(namespace, table)]:
                    out[table_id] = location or "-"
    # A table not in the catalog (not created yet): "-" too, until it appears.
    return {f.table_id: out.get(f.table_id, "-") for f in group}


def _delta(tables: Sequence[Followed]) -> dict[int, str]:
    from partition_notify.writers.lakehouse.delta import filesystem_of
    from pyarrow import fs
    out: dict[int, str] = {}
    for f in tables:
        if f.location is None or f.cursor is None:
            continue
        filesystem, root = filesystem_of(f.location)
        log = f"{root}/_delta_log"
        # The cursor's own version too: gone without a new checkpoint, the table was
        # deleted and created again (its new log may not have reached cursor + 1 yet).
        own = [f"{log}/{f.cursor:020d}.json"] if f.cursor >= 0 else []
        nxt, checkpoint, *mine = filesystem.get_file_info(
            [f"{log}/{f.cursor + 1:020d}.json",  # BEFORE_FIRST + 1: version 0
             f"{log}/_last_checkpoint", *own])
        if nxt.type != fs.FileType.NotFound:
            continue  # a new version: read it
        if mine and mine[0].type == fs.FileType.NotFound:
            continue  # read it: the reader tells a new table from log cleanup
        out[f.table_id] = (f"{checkpoint.mtime_ns}:{checkpoint.size}"
                           if checkpoint.type != fs.FileType.NotFound else "-")
    return out
