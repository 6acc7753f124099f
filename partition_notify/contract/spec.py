"""Partition specs and their canonical string form.

A *spec* maps partition keys to values. A full spec names every key of the
table (one partition); a partial spec names a non-empty subset (a set of
partitions, as in a mark-set-done message).

The canonical string sorts keys lexically and escapes values the way Hive
escapes partition path values (``FileUtils.escapePathName``): control
characters and ``"#%'*/:=?\\{[]^`` plus DEL become ``%XX``. The string is
therefore unambiguous, round-trips, and two specs are equal exactly when their
canonical strings are equal, which is what lets consumers compare strings.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence

from partition_notify.contract.names import MAX_PARTITION_KEYS, partition_key
from partition_notify.core.errors import InvalidNameError, InvalidSpecError

#: Hive writes a null partition value as this literal.
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
MAX_VALUE_LENGTH = 1024
_INT_BOUND = 10**MAX_VALUE_LENGTH
#: Subset enumeration for the coverage look-up is 2**n; tables have few keys.
MAX_SPEC_KEYS = MAX_PARTITION_KEYS

_ESCAPED = frozenset([chr(c) for c in range(0x00, 0x20)] + list("\"#%'*/:=?\\{[]^") + ["\x7f"])
_HEX = re.compile(r"[0-9A-Fa-f]{2}")
#: Any character of ``_ESCAPED``: one regex search instead of a generator per character
#: (announcing 10,000 partitions ran the generator 280,000 times).
_NEEDS_ESCAPE = re.compile("[" + re.escape("".join(sorted(_ESCAPED))) + "]")

Spec = dict[str, str]


def escape_value(value: str) -> str:
    """Escape one partition value as Hive does for path names."""
    if _NEEDS_ESCAPE.search(value) is None:
        return value
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def unescape_value(text: str, *, key: str = "?") -> str:
    """Reverse :func:`escape_value`; a stray ``%`` is an error, not a literal."""
    if "%" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "%":
            pair = text[i + 1 : i + 3]
            if not _HEX.fullmatch(pair):
                raise InvalidSpecError(
                    f"value of key {key!r}: '%' at position {i} must be followed by two hex "
                    f"digits (escape a literal '%' as %25), got {text!r}"
                )
            out.append(chr(int(pair, 16)))
            i += 3
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _value(key: str, value: object) -> str:
    if type(value) is str and 0 < len(value) <= MAX_VALUE_LENGTH and value.isascii():
        return value  # passes every check below unchanged (ASCII always encodes)
    if value is None:
        return HIVE_DEFAULT_PARTITION
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InvalidSpecError(
            f"value of partition key {key!r} must be a string or integer, "
            f"got {type(value).__name__}"
        )
    if isinstance(value, int) and not -_INT_BOUND < value < _INT_BOUND:
        # str() of a huge int raises a bare ValueError (int_max_str_digits) or takes long.
        raise InvalidSpecError(
            f"value of partition key {key!r} is an integer of more than {MAX_VALUE_LENGTH} "
            f"digits; at most {MAX_VALUE_LENGTH} characters allowed"
        )
    text = str(value)
    if text == "":
        raise InvalidSpecError(f"value of partition key {key!r} is empty")
    if len(text) > MAX_VALUE_LENGTH:
        raise InvalidSpecError(
            f"value of partition key {key!r} is {len(text)} characters; "
            f"at most {MAX_VALUE_LENGTH} allowed"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidSpecError(
            f"value of partition key {key!r} cannot be encoded as UTF-8 "
            f"({exc.reason} at position {exc.start})"
        ) from exc
    return text


def normalize(spec: Mapping[str, object]) -> Spec:
    """Validate a spec's shape (not yet against a table) and sort its keys.

    Keys are lower-cased; two keys equal but for case are a duplicate.
    """
    if not isinstance(spec, Mapping):
        raise InvalidSpecError(f"a partition spec must be a mapping, got {type(spec).__name__}")
    if not spec:
        raise InvalidSpecError("a partition spec needs at least one key=value pair")
    if len(spec) > MAX_SPEC_KEYS:
        raise InvalidSpecError(
            f"a partition spec has at most {MAX_SPEC_KEYS} keys, got {len(spec)}"
        )
    out: Spec = {}
    for raw_key, raw_value in spec.items():
        try:
            key = partition_key(raw_key)
        except InvalidNameError as exc:
            raise InvalidSpecError(str(exc)) from exc
        if key in out:
            raise InvalidSpecError(f"partition key {key!r} appears twice in the spec")
        out[key] = _value(key, raw_value)
    return dict(sorted(out.items()))


def key_order(spec: Mapping[str, object]) -> tuple[str, ...] | None:
    """The keys :func:`normalize` made of ``spec``'s, in ``spec``'s own order, when
    every key is a ``str`` (else None). Call it on a spec normalize accepted."""
    if not all(type(k) is str for k in spec):
        return None
    return tuple(partition_key(k) for k in spec)


def normalize_known(spec: dict[str, object], keys: tuple[str, ...],
                    keys_sorted: bool | None = None) -> Spec:
    """:func:`normalize` of ``spec`` whose keys, in this order, normalize accepted before
    as ``keys`` (:func:`key_order`): what depends on the keys alone (names, count,
    duplicates, whether ``keys`` are sorted: ``keys_sorted``, else checked) is not
    checked again, each value is, in the same order. Announcing 10,000 partitions of
    one table checked the same keys 10,000 times."""
    # _value's first test inline: most values pass it (a call per value cost as much).
    out = {key: value if (type(value) is str and 0 < len(value) <= MAX_VALUE_LENGTH
                          and value.isascii()) else _value(key, value)
           for key, value in zip(keys, spec.values(), strict=True)}
    if keys_sorted is None:
        keys_sorted = list(keys) == sorted(keys)
    return out if keys_sorted else dict(sorted(out.items()))


def canonical(spec: Mapping[str, object]) -> str:
    """The canonical string: ``a=1/b=x%2Fy`` with keys sorted lexically."""
    return canonical_normal(normalize(spec))


def canonical_normal(norm: Spec) -> str:
    """:func:`canonical` of a spec that :func:`normalize` (or :func:`coerce`) returned,
    without validating it again: a publish computed it three times per partition."""
    return "/".join(f"{k}={escape_value(v)}" for k, v in norm.items())


def parse(text: str) -> Spec:
    """Parse ``key=value/key=value`` (values escaped) into a normalised spec.

    Keys may come in any order; the result is sorted.
    """
    if not isinstance(text, str):
        raise InvalidSpecError(f"a partition spec string must be a str, got {type(text).__name__}")
    if not text.strip():
        raise InvalidSpecError("a partition spec needs at least one key=value pair, got ''")
    pairs: dict[str, str] = {}
    for part in text.split("/"):
        if "=" not in part:
            raise InvalidSpecError(f"spec element {part!r} in {text!r} is not key=value")
        raw_key, raw_value = part.split("=", 1)
        try:
            key = partition_key(raw_key)
        except InvalidNameError as exc:
            raise InvalidSpecError(f"{exc} (in spec {text!r})") from exc
        if key in pairs:
            raise InvalidSpecError(f"partition key {key!r} appears twice in {text!r}")
        if raw_value == "":
            raise InvalidSpecError(f"value of partition key {key!r} is empty in {text!r}")
        pairs[key] = unescape_value(raw_value, key=key)
    return normalize(pairs)


def coerce(spec: str | Mapping[str, object]) -> Spec:
    """Accept either form a user may hand us."""
    return parse(spec) if isinstance(spec, str) else normalize(spec)


def check_against(spec: Spec, table_keys: Sequence[str], *, full: bool, table: str) -> None:
    """Check that ``spec`` uses only ``table_keys`` (all of them when ``full``)."""
    unknown = [k for k in spec if k not in table_keys]
    if unknown:
        raise InvalidSpecError(
            f"table {table} has partition keys {list(table_keys)}; "
            f"unknown key(s) {unknown} in spec {canonical(spec)!r}"
        )
    if full:
        missing = [k for k in table_keys if k not in spec]
        if missing:
            raise InvalidSpecError(
                f"a partition of {table} needs a value for every key {list(table_keys)}; "
                f"missing {missing} in {canonical(spec)!r}"
            )


def in_key_order(spec: Spec, table_keys: Sequence[str]) -> dict[str, str]:
    """The spec ordered by the table's partition keys (HCatalog's wire order)."""
    return {k: spec[k] for k in table_keys if k in spec}


def path(spec: Spec, table_keys: Sequence[str]) -> str:
    """The relative partition directory, ``k1=v1/k2=v2`` in table key order."""
    return "/".join(f"{k}={escape_value(spec[k])}" for k in table_keys if k in spec)


def covering_specs(spec: Spec) -> list[str]:
    """Canonical strings of every non-empty sub-spec of ``spec``.

    A set-done for any of these covers ``spec``: ``datestamp=X`` done means
    every partition with that datestamp is done, whatever its region.
    """
    # Each pair escaped once, not once per subset it is in: escaping was most
    # of this function's time, which counts in every look-up.
    pairs = [f"{k}={escape_value(v)}" for k, v in spec.items()]
    out: list[str] = []
    for n in range(1, len(pairs) + 1):
        out.extend(map("/".join, itertools.combinations(pairs, n)))
    return out


def covers(done: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    """True when a set-done for ``done`` marks everything in ``wanted`` done."""
    return bool(done) and all(wanted.get(k) == v for k, v in done.items())
