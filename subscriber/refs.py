"""What ``subscribe(tables)`` means: the table references it accepts.

* ``"db.table"`` — one table.
* ``("db", "table")`` — one table: a pair of *plain* names (no dot; names
  never contain one).
* any other tuple, a list or any iterable — several tables, each a
  ``"db.table"`` string or a ``(db, table)`` pair:
  ``("sales.orders", "sales.returns")`` is two tables.

Anything else is refused with :class:`InvalidNameError` naming it, e.g.
``("sales", "sales.returns")`` (a plain name cannot be a table of its own)
or ``("a", "b", "c")``: a guess there could silently follow the wrong table.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeGuard

from partition_notify.contract import names
from partition_notify.core.errors import InvalidNameError

TableRef = str | tuple[str, str]

_SHAPES = "'db.table' strings or (db, table) pairs of plain names"


def _is_pair(ref: object) -> TypeGuard[tuple[str, str]]:
    return (
        isinstance(ref, tuple)
        and len(ref) == 2
        and all(isinstance(x, str) and "." not in x for x in ref)
    )


def _one(ref: object, whole: object) -> tuple[str, str]:
    if isinstance(ref, str):
        db, sep, name = ref.partition(".")
        if not sep:
            where = "" if ref is whole else f" in {whole!r}"
            raise InvalidNameError(f"table {ref!r}{where} must be written db.table")
        return names.db_name(db), names.table_name(name)
    if isinstance(ref, tuple) and len(ref) == 2 and all(isinstance(x, str) for x in ref):
        # A pair with a dot in a name (``wait_for_set_done("db", "t.x")``, a three-part
        # catalog.db.table on the CLI) is refused by the name check, which says which
        # name and why, rather than as a reference of the wrong shape.
        db, name = ref
        return names.db_name(db), names.table_name(name)
    raise InvalidNameError(f"table reference {ref!r} in {whole!r} is not one of: {_SHAPES}")


def _many(refs: list[object], whole: object) -> list[tuple[str, str]]:
    """Each db name is checked once however many tables name it (100,000 share one)."""
    dbs: dict[object, str] = {}
    out: list[tuple[str, str]] = []
    for ref in refs:
        if type(ref) is tuple and len(ref) == 2:
            db, name = ref
            if type(db) is str and type(name) is str and "." not in db and "." not in name:
                checked = dbs.get(db)
                if checked is None:
                    checked = dbs[db] = names.db_name(db)
                out.append((checked, names.table_name(name)))
                continue
        out.append(_one(ref, whole))
    return out


def table_keys(tables: TableRef | Iterable[TableRef]) -> list[tuple[str, str]]:
    """The (db, table) pairs ``tables`` names, in order; see the module docstring."""
    if isinstance(tables, str) or _is_pair(tables):
        refs: list[object] = [tables]
    elif isinstance(tables, tuple):
        for ref in tables:
            if not (isinstance(ref, str) and "." in ref) and not _is_pair(ref):
                raise InvalidNameError(
                    f"ambiguous tables {tables!r}: a tuple is one (db, table) pair of plain "
                    f"names or several {_SHAPES}; {ref!r} is neither"
                )
        refs = list(tables)
    elif isinstance(tables, Iterable):
        refs = list(tables)
    else:
        raise InvalidNameError(f"tables must be {_SHAPES}, got {type(tables).__name__}")
    if not refs:
        raise InvalidNameError("subscribe needs at least one table")
    return _many(refs, tables)
