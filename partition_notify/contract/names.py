"""Rules for database, table and partition-key names.

Names are case-insensitive and stored lower-case, as Hive and HCatalog do, so
``Sales.Orders`` and ``sales.orders`` are one table.
"""

from __future__ import annotations

import re

from partition_notify.core.errors import InvalidNameError

MAX_NAME_LENGTH = 128
#: Partition keys per table. Coverage look-ups enumerate the 2**n sub-specs of a
#: partition, so every spec operation has this bound; register enforces it too.
MAX_PARTITION_KEYS = 12
_OBJECT_NAME = re.compile(r"[a-z0-9_]+")
_KEY_NAME = re.compile(r"[a-z_][a-z0-9_]*")
#: A name already in normal form passes every check of :func:`_check` unchanged:
#: one match instead of five steps (subscribing to 100,000 tables checks 200,000).
_NORMAL_OBJECT_NAME = re.compile(rf"[a-z0-9_]{{1,{MAX_NAME_LENGTH}}}")
#: The same for a partition key (every key of every announced partition is checked).
_NORMAL_KEY_NAME = re.compile(rf"[a-z_][a-z0-9_]{{0,{MAX_NAME_LENGTH - 1}}}")


def _check(kind: str, value: object, pattern: re.Pattern[str], expected: str) -> str:
    if not isinstance(value, str):
        raise InvalidNameError(f"{kind} must be a string, got {type(value).__name__}")
    if not value.isascii():
        # str.lower() would fold e.g. the Kelvin sign U+212A into 'k': refuse, don't guess.
        bad = sorted({c for c in value if not c.isascii()})
        shown = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in bad)
        raise InvalidNameError(f"{kind} {value!r}: non-ASCII character(s) {shown}; expected "
                               f"ASCII {expected}")
    name = value.strip().lower()
    if not name:
        raise InvalidNameError(f"{kind} is empty; expected {expected}")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidNameError(
            f"{kind} {value!r} is {len(name)} characters; at most {MAX_NAME_LENGTH} allowed"
        )
    if not pattern.fullmatch(name):
        bad = sorted({c for c in name if not re.fullmatch(r"[a-z0-9_]", c)})
        detail = f"illegal character(s) {''.join(bad)!r}" if bad else "must not start with a digit"
        raise InvalidNameError(f"{kind} {value!r}: {detail}; expected {expected}")
    return name


def db_name(value: object) -> str:
    """Validate and normalise a database name."""
    if type(value) is str and _NORMAL_OBJECT_NAME.fullmatch(value):
        return value
    return _check("database name", value, _OBJECT_NAME, "letters, digits and '_'")


def table_name(value: object) -> str:
    """Validate and normalise a table name."""
    if type(value) is str and _NORMAL_OBJECT_NAME.fullmatch(value):
        return value
    return _check("table name", value, _OBJECT_NAME, "letters, digits and '_'")


def partition_key(value: object) -> str:
    """Validate and normalise one partition-key name."""
    if type(value) is str and _NORMAL_KEY_NAME.fullmatch(value):
        return value
    return _check(
        "partition key", value, _KEY_NAME, "a letter or '_' followed by letters, digits and '_'"
    )


def partition_keys(values: object) -> tuple[str, ...]:
    """Validate an ordered list of partition keys: non-empty, no duplicates."""
    if isinstance(values, str) or not isinstance(values, list | tuple):
        raise InvalidNameError(
            f"partition keys must be a list of names, got {type(values).__name__}"
        )
    if not values:
        raise InvalidNameError("a partitioned table needs at least one partition key")
    if len(values) > MAX_PARTITION_KEYS:
        raise InvalidNameError(
            f"{len(values)} partition keys given; a table has at most {MAX_PARTITION_KEYS}"
        )
    keys = tuple(partition_key(v) for v in values)
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            raise InvalidNameError(f"partition key {key!r} is listed twice in {list(values)!r}")
        seen.add(key)
    return keys
