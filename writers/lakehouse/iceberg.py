"""Iceberg snapshots as :class:`~.commits.Commit` s, read through pyiceberg (extra ``iceberg``).

Catalogs are named in the registration (``register --catalog NAME``); their
properties come from ``PN_ICEBERG_CATALOG__<NAME>__<PROPERTY>`` variables
(pyiceberg's own spelling: ``__`` is a dot, ``_`` a dash, so
``PN_ICEBERG_CATALOG__LAKE__S3__ACCESS_KEY_ID`` is ``s3.access-key-id``), on top
of pyiceberg's own configuration (``~/.pyiceberg.yaml``, ``PYICEBERG_CATALOG__*``).
Secrets stay in the environment: nothing here logs a property.

Partition values are Iceberg's human strings of the transform result, the
ones Iceberg's partition paths use: identity as the value (a date
``2026-01-01``), ``day`` ``2026-01-01``, ``hour`` ``2026-01-01-10``, ``month``
``2026-01``, ``year`` ``2026``, ``bucket[N]`` and ``truncate[W]`` their result;
a partition is named after the partition field (``datestamp_day``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from partition_notify.writers.lakehouse.commits import (
    Commit,
    Gap,
    Spec,
    Unannounceable,
    Unloadable,
    canonical,
    named,
    unique,
)
from partition_notify.writers.lakehouse.schema import BEFORE_FIRST
from partition_notify.writers.lakehouse.specs import partition_in_keys

from partition_notify.core.errors import ConfigurationError, InvalidSpecError, ValidationError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

ENV_PREFIX = "PN_ICEBERG_CATALOG__"


def catalog_properties(name: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The properties of catalog ``name`` from ``PN_ICEBERG_CATALOG__<NAME>__*``."""
    env = os.environ if environ is None else environ
    prefix = f"{ENV_PREFIX}{name.upper()}__"
    return {k[len(prefix):].lower().replace("__", ".").replace("_", "-"): v
            for k, v in env.items() if k.upper().startswith(prefix)}


class Catalogs:
    """One catalog object per name for the whole process: one connection pool per
    catalog, however many of its tables are followed."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = environ
        self._cache: dict[str, Catalog] = {}
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}

    def get(self, name: str) -> Catalog:
        # One lock per name, not one for all: a catalog that hangs while it loads (a
        # REST catalog's config call) holds up its own tables only.
        with self._lock:
            lock = self._loading.setdefault(name, threading.Lock())
        with lock:
            if name not in self._cache:
                self._cache[name] = _load_catalog(name, catalog_properties(name, self._environ))
            return self._cache[name]


    def loaded(self, name: str) -> Catalog | None:
        """Catalog ``name`` if it is loaded already; never waits for one that loads."""
        return self._cache.get(name)


def _load_catalog(name: str, props: dict[str, str]) -> Catalog:
    try:
        from pyiceberg.catalog import load_catalog
    except ImportError:
        raise ConfigurationError("following Iceberg tables needs pyiceberg: "
                                 "pip install 'partition-notify[iceberg]'") from None
    try:
        return load_catalog(name, **props)
    except (ValueError, KeyError) as exc:  # pyiceberg: no type / unknown type
        # Only the property names: their values may be secrets.
        raise ConfigurationError(
            f"Iceberg catalog {name!r}: {exc} (properties set: {sorted(props) or 'none'}; "
            f"expected {ENV_PREFIX}{name.upper()}__URI and friends)") from None


class IcebergReader:
    """The commits of one Iceberg table, loaded fresh at each poll."""

    def __init__(self, catalog: Catalog, identifier: str, keys: Sequence[str]) -> None:
        self.keys = list(keys)
        self.identifier = identifier
        self._catalog = catalog
        self._table = _load_table(catalog, identifier)

    def head(self) -> int | None:
        """The current snapshot id; None while the table has none (or does not exist)."""
        snap = None if self._table is None else self._table.current_snapshot()
        return None if snap is None else snap.snapshot_id

    def check_keys(self) -> None:
        """At registration: every key must be a field of one of the table's specs (after
        a partition evolution the keys may rightly differ from the current spec's; each
        file is checked when read, specs.py). A key no spec has can never be given: the
        follower would stop at the table's next commit. No table yet: no fields, unless
        the catalog holds it under another case of its name (refused, naming both)."""
        if self._table is None:
            _refuse_other_spelling(self._catalog, self.identifier, "register with")
            return
        fields = {f.name for spec in self._table.specs().values() for f in spec.fields}
        unknown = [k for k in self.keys if k not in fields]
        if unknown:
            raise InvalidSpecError(
                f"{self.identifier}: keys {unknown} are not partition fields of the table "
                f"(its fields: {sorted(fields)}); register it with the field names as the "
                "keys, e.g. datestamp_day for day(ts)")

    def table_uuid(self) -> str | None:
        """The table's ``table-uuid``; None while it does not exist."""
        return None if self._table is None else str(self._table.metadata.table_uuid)

    def uuid_at(self, cursor: int) -> str | None:
        del cursor  # one uuid for the table's whole life
        return self.table_uuid()

    def commits_after(self, cursor: int, uuid: str | None = None) -> Iterator[Commit]:
        """Snapshots after ``cursor`` on the current branch, oldest first.

        Raises :class:`Gap` (before yielding anything) when a snapshot between
        the cursor and the current one was expired, the cursor is no longer an
        ancestor (a rollback), or the table is not the one of ``table-uuid`` ``uuid``
        (dropped and created again: followed from its first snapshot);
        :class:`Unannounceable` at a snapshot whose partitions cannot be told (keys that
        do not fit, its manifest list or a manifest missing or corrupt).
        """
        table = self._table
        if table is None:
            if cursor != BEFORE_FIRST:  # it was there: dropped, not "no commit yet"
                raise Unloadable(f"{self.identifier}: the table no longer exists in its "
                                 "catalog (dropped or renamed); followed again when one of "
                                 "that name is created (a gap: another table)", cursor, None)
            # Registered before its writer created it, maybe under another spelling of
            # the catalog's name: said at every run, not read as "no commit yet".
            _refuse_other_spelling(self._catalog, self.identifier,
                                   "unregister it and register it again with")
            return
        found = self.table_uuid()
        if uuid is not None and found != uuid and cursor != BEFORE_FIRST:
            raise Gap(f"{self.identifier}: table-uuid is {found}, not {uuid} as when "
                      f"snapshot {cursor} was handled: the table was dropped and created "
                      "again; following the new one from its first snapshot",
                      BEFORE_FIRST, found)
        for snap in _chain(table, cursor, self.identifier):
            try:
                commit = self._commit(table, snap)
            except InvalidSpecError as exc:
                raise Unannounceable(snap.snapshot_id, exc) from exc
            except (ConnectionError, TimeoutError):  # the store's, for now: the next run
                raise
            except Exception as exc:  # the driver's: a manifest list or manifest gone, corrupt
                # Stopped on this snapshot as on a Delta version that is not JSON: its
                # partitions cannot be known. Repaired, the next read goes through.
                raise Unannounceable(snap.snapshot_id, InvalidSpecError(
                    f"{self.identifier} snapshot {snap.snapshot_id}: its manifest list or a "
                    f"manifest cannot be read ({type(exc).__name__}: {_first(exc)}); "
                    "stopped before it")) from exc
            yield replace(commit, table_uuid=found)

    def _commit(self, table: Table, snap: Snapshot) -> Commit:
        from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntryStatus

        op = snap.summary.operation.value if snap.summary is not None else "append"
        props = dict(snap.summary.additional_properties) if snap.summary is not None else {}
        if op == "replace":
            return Commit(snap.snapshot_id, op, [], [], set(), rewrite_only=True,
                          properties=props)
        if op == "delete":
            return Commit(snap.snapshot_id, op, [], [], set(), delete_only=True,
                          properties=props)
        added: list[Spec] = []
        removed: list[Spec] = []
        existed: set[tuple[str, ...]] = set()
        me = snap.snapshot_id
        for manifest in snap.manifests(table.io):
            if manifest.content != ManifestContent.DATA:
                continue  # delete files: row-level deletes, not data
            ours = manifest.added_snapshot_id == me
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                if entry.data_file.content != DataFileContent.DATA:
                    continue
                is_added = entry.status == ManifestEntryStatus.ADDED and entry.snapshot_id == me
                is_removed = ours and entry.status == ManifestEntryStatus.DELETED
                try:
                    values = partition_in_keys(table, manifest.partition_spec_id,
                                               entry.data_file.partition, self.keys,
                                               self.identifier)
                except InvalidSpecError:
                    if is_added:
                        raise  # the commit cannot be announced: stop before it, loudly
                    continue  # a file of a layout the keys cannot express: not ours
                spec = named(values, self.keys, what=f"{self.identifier} snapshot {me}")
                if is_added:
                    added.append(spec)
                else:
                    existed.add(canonical(spec, self.keys))
                    if is_removed:
                        removed.append(spec)
        return Commit(me, op, unique(added, self.keys), unique(removed, self.keys), existed,
                      delete_only=bool(removed) and not added, properties=props)


def _first(exc: BaseException) -> str:
    """The first line of the driver's message, at most 500 characters."""
    return (str(exc).strip().splitlines() or [""])[0][:500]


def _refuse_other_spelling(catalog: Catalog, identifier: str, remedy: str) -> None:
    """Raises ValidationError when a SQL catalog holds ``identifier`` under a spelling of
    the catalog's name, the namespace or the table name in another case. The settings
    are found whatever the case (an environment variable is spelled in capitals), but
    pyiceberg's SQL catalog keeps each table under the names its writer gave and compares
    them exactly: followed under another spelling, the table would never be found and
    nothing ever announced (tests/lakehouse/test_identifier_case.py)."""
    try:
        from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
    except ImportError:  # pyiceberg without its sql extra: no SQL catalog either
        return
    if not isinstance(catalog, SqlCatalog):
        return  # REST, Glue, Hive: the server resolves names, not this row
    from sqlalchemy import func, select
    from sqlalchemy.orm import Session

    namespace = catalog.namespace_to_string(catalog.namespace_from(identifier))
    name = catalog.table_name_from(identifier)
    t = IcebergTables
    with Session(catalog.engine) as session:
        found = session.execute(select(t.catalog_name, t.table_namespace, t.table_name).where(
            func.lower(t.catalog_name) == catalog.name.lower(),
            func.lower(t.table_namespace) == namespace.lower(),
            func.lower(t.table_name) == name.lower(),
        ).order_by(t.catalog_name, t.table_namespace, t.table_name).limit(1)).first()
    if found is None or tuple(found) == (catalog.name, namespace, name):
        return
    other, theirs = found[0], f"{found[1]}.{found[2]}"
    if theirs == f"{namespace}.{name}":  # only the catalog's name differs
        raise ValidationError(
            f"catalog {catalog.name!r} has no table {identifier}, but the same SQL catalog "
            f"database holds it under catalog name {other!r}, the writer's spelling "
            f"(pyiceberg compares catalog names exactly): {remedy} --catalog {other}")
    where = "" if other == catalog.name else f" under catalog name {other!r}"
    raise ValidationError(
        f"catalog {catalog.name!r} has no table {identifier}, but the same SQL catalog "
        f"database holds {theirs}{where}, the writer's spelling (pyiceberg compares "
        f"namespace and table names exactly): {remedy}"
        + ("" if other == catalog.name else f" --catalog {other}") + f" --identifier {theirs}")


def _load_table(catalog: Catalog, identifier: str) -> Table | None:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return catalog.load_table(identifier)
    except NoSuchTableError:
        return None


def _chain(table: Table, cursor: int, identifier: str) -> list[Snapshot]:
    current = table.current_snapshot()
    if current is None or current.snapshot_id == cursor:
        return []
    head = current.snapshot_id
    chain = [current]
    seen = {head}
    while True:
        parent = chain[-1].parent_snapshot_id
        if parent == cursor or (parent is None and cursor == BEFORE_FIRST):
            return chain[::-1]
        if parent in seen:
            # Metadata any writer can commit (pyiceberg checks no parent): walking on
            # would go round for ever, on a read thread nothing can stop.
            raise Gap(f"{identifier}: the history of the current snapshot {head} loops "
                      f"back to snapshot {parent}; {cursor} is not in it", head)
        if parent is None:
            # pyiceberg's expiry also drops the parent link of the expired one's child:
            # the cursor's own expiry (a daily "older than" run) loses no commit.
            if cursor != BEFORE_FIRST and _child_of(table, chain[-1], cursor):
                return chain[::-1]
            raise Gap(f"{identifier}: the snapshots between {cursor} and the current {head} "
                      "are no longer in the table's history (expired, or rolled back)", head)
        snap = table.snapshot_by_id(parent)
        if snap is None:
            raise Gap(f"{identifier}: snapshot {parent} was expired before it was read", head)
        chain.append(snap)
        seen.add(parent)


def _child_of(table: Table, snap: Snapshot, cursor: int) -> bool:
    """Whether ``snap``, whose parent link is gone, was committed right after snapshot
    ``cursor`` (expired) on top of it: ``snap`` holds a manifest ``cursor`` added (its
    files were not rolled back) and its sequence number is the next after that
    manifest's, ``cursor``'s (no commit in between, on any branch). Not so, or a v1
    table (no sequence numbers), or ``cursor`` added no manifest ``snap`` still holds
    (merged, or a delete): unknown, so a gap, as before."""
    seq = snap.sequence_number
    if not seq:
        return False
    for manifest in snap.manifests(table.io):
        if manifest.added_snapshot_id == cursor:
            return manifest.sequence_number == seq - 1
    return False
