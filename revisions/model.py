"""The values of the revision model: write transactions, snapshots and name rules.

Plain data, no database: a :class:`Snapshot` or :class:`WriteTransaction`
travels as JSON to jobs and other processes (``to_dict``/``from_dict``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from partition_notify.revisions.schema import MAX_FAMILY_CHARS, MAX_TABLE_CHARS, RevisionTxnRow

from partition_notify.contract import names
from partition_notify.core.errors import NotFoundError, ValidationError
from partition_notify.core.limits import MAX_SECONDS, excerpt

Clock = Callable[[], float]

#: The family of writers that do not split a table into column families.
DEFAULT_FAMILY = "data"
#: Keep-alive of a transaction begun without one, in seconds.
DEFAULT_KEEP_ALIVE_SECONDS = 600.0



@dataclass(frozen=True, slots=True)
class WriteTransaction:
    """A running write transaction: tag everything written with ``revision``."""

    table: str
    revision: int
    families: tuple[str, ...]
    keep_alive: float
    started_at: float
    expires_at: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "revision": self.revision,
            "families": list(self.families),
            "keepAlive": self.keep_alive,
            "startedAt": self.started_at,
            "expiresAt": self.expires_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WriteTransaction:
        """Rebuild a transaction handed over as JSON (e.g. to another process)."""
        try:
            return cls(
                str(data["table"]),
                int(data["revision"]),
                tuple(str(f) for f in data["families"]),
                float(data["keepAlive"]),
                float(data["startedAt"]),
                float(data["expiresAt"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValidationError(f"not a write transaction: {exc!r} in {dict(data)!r}") from exc

    @classmethod
    def _of(cls, row: RevisionTxnRow) -> WriteTransaction:
        return cls(
            row.table_name,
            int(row.revision),
            tuple(row.families),
            float(row.keep_alive_seconds),
            float(row.started_at),
            float(row.expires_at),
        )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A repeatable view of a table: one revision per family, minus the aborted ones."""

    table: str
    revisions: Mapping[str, int]
    latest_revision: int
    aborted: frozenset[int] = field(default_factory=frozenset)

    def revision(self, family: str) -> int:
        """Highest revision of ``family`` this snapshot covers.

        A family no transaction had declared when the snapshot was taken has
        nothing running, so it gets :attr:`latest_revision`.
        """
        return self.revisions.get(family, self.latest_revision)

    def includes(self, revision: int, family: str) -> bool:
        """Whether data written at ``revision`` to ``family`` is part of this snapshot."""
        return revision <= self.revision(family) and revision not in self.aborted

    def visible(self, revisions: Iterable[int], family: str) -> list[int]:
        return [r for r in revisions if self.includes(r, family)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "revisions": dict(sorted(self.revisions.items())),
            "latestRevision": self.latest_revision,
            "aborted": sorted(self.aborted),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Snapshot:
        """Rebuild a snapshot passed to a job as JSON, so every task reads the same view."""
        try:
            return cls(
                str(data["table"]),
                {str(k): int(v) for k, v in dict(data["revisions"]).items()},
                int(data["latestRevision"]),
                frozenset(int(r) for r in data.get("aborted", ())),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValidationError(f"not a snapshot: {exc!r} in {dict(data)!r}") from exc


def table_name(table: object) -> str:
    if not isinstance(table, str) or not table or table != table.strip():
        raise ValidationError(
            f"table name must be a non-empty string without surrounding spaces, got {table!r}"
        )
    if len(table) > MAX_TABLE_CHARS:
        raise ValidationError(
            f"table name {table[:40]!r}... is {len(table)} characters; at most {MAX_TABLE_CHARS}"
        )
    return table


def dataset_name(name: object) -> str:
    """A SNAPSHOT dataset's name: the ``<db>.<table>`` it announces its versions on,
    spelt as the catalog spells it (names are exact, as revision names are)."""
    name = table_name(name)
    db, dot, table = name.partition(".")
    if not (db and dot and table):
        raise ValidationError(
            f"SNAPSHOT dataset name {name!r}: expected <db>.<table>, the table its versions "
            "are announced on"
        )
    normal = f"{names.db_name(db)}.{names.table_name(table)}"
    if normal != name:
        raise ValidationError(
            f"SNAPSHOT dataset name {name!r}: dataset names are exact; spelt {normal}"
        )
    return name


def normal_table(name: str) -> str | None:
    """``name`` as the catalog spells a ``db.table`` (lower case), or None when it is none."""
    db, dot, table = name.partition(".")
    try:
        return f"{names.db_name(db)}.{names.table_name(table)}" if dot else None
    except ValidationError:
        return None


def unknown_table(name: str, registered_as: str | None = None) -> NotFoundError:
    """The error for a snapshot of a name no catalog, dataset or transaction knows: its
    empty snapshot would read as "nothing written yet" to the job handed it.
    ``registered_as``: the registered table ``name`` spells in another case."""
    if registered_as is not None:
        return NotFoundError(
            f"no snapshot of {excerpt(name)}: revision names are exact, and the registered "
            f"table is spelt {registered_as}; expected that name")
    if normal_table(name) == name:
        what = "is not a registered table"
    else:
        what = "is not a valid db.table name"
    return NotFoundError(
        f"no snapshot of {excerpt(name)}: it {what}, not a SNAPSHOT dataset, and no write "
        "transaction has used it; expected a registered table's db.table, a defined "
        "SNAPSHOT dataset or a name with revisions (rev tables)")


def family_names(families: Iterable[str], *, table: str) -> tuple[str, ...]:
    if isinstance(families, str):
        raise ValidationError(
            f"families of table {table} must be a list of names, not the string {families!r}"
        )
    try:
        out = sorted(set(families))
    except TypeError as exc:  # None, a number, names that are lists
        raise ValidationError(
            f"families of table {table} must be a list of names, got {families!r:.80}"
        ) from exc
    if not out:
        raise ValidationError(
            f"a write transaction on table {table} must declare at least one column family"
        )
    for f in out:
        if not isinstance(f, str) or not f or f != f.strip() or len(f) > MAX_FAMILY_CHARS:
            raise ValidationError(
                f"family {f!r} of table {table}: expected a non-empty name of "
                f"at most {MAX_FAMILY_CHARS} characters without surrounding "
                "spaces"
            )
    return tuple(out)


def keep_alive_seconds(seconds: object) -> float:
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or not 0 < seconds <= MAX_SECONDS
    ):
        raise ValidationError(f"keep_alive must be a positive number of seconds, at most "
                              f"{MAX_SECONDS}, got {seconds!r}")
    return float(seconds)


__all__ = [
    "DEFAULT_FAMILY",
    "DEFAULT_KEEP_ALIVE_SECONDS",
    "Clock",
    "Snapshot",
    "WriteTransaction",
    "family_names",
    "keep_alive_seconds",
    "normal_table",
    "table_name",
    "unknown_table",
]
