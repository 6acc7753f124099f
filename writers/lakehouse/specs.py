"""An Iceberg data file's partition, per the spec the file was written with, in the
table's registered keys: partition evolution (a spec change mid-table) handled.

Every data file carries its spec id; its partition tuple is read with *that* spec. The
registered keys are the contract subscribers hold (specs, set-done, ``wait``) and
cannot change once something was announced, so each file's partition is expressed in
them:

* a registered key that is a field of the file's spec: that field's value;
* a registered key the file's spec lacks, where the spec has a finer time transform
  of the same source column (``day(ts)`` registered, ``hour(ts)`` after the
  evolution; hour -> day -> month -> year): the value coarsened to the registered
  transform (``ts_hour=2026-01-01-10`` is ``datestamp_day=2026-01-01``);
* fields of the file's spec that are not registered keys (a field added by the
  evolution, e.g. ``bucket(16, id)``): left out, the file is in the registered
  partition all the same; logged once per table and spec (``lakehouse.spec_fields``);
* a registered key the file's spec cannot give (the field was dropped or replaced by
  an unrelated transform): :class:`InvalidSpecError`; the follower stops before that
  commit and says so every run (never skips it). The way on is a new registration
  for the new layout: keys cannot change under subscribers.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from partition_notify.core.errors import InvalidSpecError

if TYPE_CHECKING:
    from pyiceberg.partitioning import PartitionField
    from pyiceberg.table import Table

log = logging.getLogger(__name__)
#: Time transforms from finest to coarsest.
_ORDER = ("hour", "day", "month", "year")
_EPOCH = dt.date(1970, 1, 1)


def partition_in_keys(table: Table, spec_id: int, record: Any, keys: Sequence[str],
                      identifier: str) -> dict[str, str | None]:
    """The partition of a data file written with spec ``spec_id`` (its partition tuple
    ``record``) as ``{registered key: human value}`` (module docstring)."""
    spec = table.specs()[spec_id]
    own = {f.name: (f, record[i]) for i, f in enumerate(spec.fields)}
    out: dict[str, str | None] = {}
    for key in keys:
        if key in own:
            out[key] = _human(table, *own[key])
            continue
        value = _derived(table, key, list(own.values()))
        if value is None:
            raise InvalidSpecError(
                f"{identifier}: partition spec {spec_id} has fields {sorted(own)}, which do "
                f"not give the registered key {key!r} (registered keys {list(keys)}); "
                "register the new layout as a new table")
        out[key] = value[0]
    extra = tuple(sorted(set(own) - set(keys)))
    if extra:
        _note_extra(identifier, str(table.metadata.table_uuid), spec_id, extra)
    return out


def _human(table: Table, field: PartitionField, raw: Any) -> str | None:
    if raw is None:
        return None
    source = table.schema().find_field(field.source_id).field_type
    return str(field.transform.to_human_string(source, raw))


def _derived(table: Table, key: str, own: list[tuple[PartitionField, Any]],
             ) -> tuple[str | None] | None:
    """(value,) of registered field ``key`` coarsened from a finer time field of the same
    column in ``own``; None when none fits."""
    target = _registered_field(table, key)
    if target is None or _kind(target) not in _ORDER:
        return None
    for field, raw in own:
        kind = _kind(field)
        if (field.source_id == target.source_id and kind in _ORDER
                and _ORDER.index(kind) <= _ORDER.index(_kind(target))):
            if raw is None:
                return (None,)
            return (_human(table, target, _coarsen(int(raw), kind, _kind(target))),)
    return None


def _registered_field(table: Table, key: str) -> PartitionField | None:
    """The field named ``key`` in the newest spec that has one."""
    for spec_id in sorted(table.specs(), reverse=True):
        for field in table.specs()[spec_id].fields:
            if field.name == key:
                return field
    return None


def _kind(field: PartitionField) -> str:
    return type(field.transform).__name__.removesuffix("Transform").lower()


def _coarsen(raw: int, kind: str, to: str) -> int:
    """Iceberg's ordinal of a time transform (hours/days/months/years since 1970) in a
    coarser one."""
    if kind == to:
        return raw
    if kind == "hour":
        return _coarsen(raw // 24, "day", to)
    if kind == "day":
        day = _EPOCH + dt.timedelta(days=raw)
        months = (day.year - 1970) * 12 + day.month - 1
        return _coarsen(months, "month", to)
    return raw // 12  # month -> year


@functools.lru_cache(maxsize=1024)  # once per (table, spec): bounded memory
def _note_extra(identifier: str, table_uuid: str, spec_id: int,
                extra: tuple[str, ...]) -> None:
    del table_uuid  # part of the cache key only: a table dropped and created again
    log.warning("iceberg follower: %s partition spec %d has field(s) %s that are not "
                "registered keys: its files are announced by the registered keys",
                identifier, spec_id, ", ".join(extra),
                extra={"pn_event": "lakehouse.spec_fields"})
