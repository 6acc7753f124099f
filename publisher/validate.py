"""Checks a publisher runs before anything is logged (writers run them before writing data)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import NoReturn

from partition_notify.store import EventDraft, TableInfo
from partition_notify.store.schema import MAX_SPEC_CHARS

from partition_notify.contract import spec
from partition_notify.core import limits
from partition_notify.core.errors import InvalidSpecError, ValidationError

SpecLike = str | Mapping[str, object]


def partitions(info: TableInfo, partitions: Iterable[SpecLike]) -> list[spec.Spec]:
    return partitions_canon(info, partitions)[0]


def partitions_canon(info: TableInfo,
                     partitions: Iterable[SpecLike]) -> tuple[list[spec.Spec], list[str]]:
    """:func:`partitions` and each one's canonical string (computed once, here). Two
    lists, not a (spec, string) pair each: a pair holding a dict is an object the
    garbage collector tracks, one per partition for the whole announce."""
    if isinstance(partitions, str | bytes | Mapping) or not isinstance(partitions, Iterable):
        # A str would be iterated per character, a mapping per key.
        raise InvalidSpecError(
            f"partitions must be a list of specs, got {type(partitions).__name__} "
            f"{partitions!r:.80}; wrap a single spec in a list"
        )
    out: list[spec.Spec] = []
    seen: dict[str, None] = {}  # the canonical strings, in order
    # Key tuples (as given) already normalised and checked against the table, and
    # whether the normalised ones are sorted.
    accepted: dict[tuple[object, ...], tuple[tuple[str, ...], bool]] = {}
    for i, raw in enumerate(partitions):
        try:
            if type(raw) is dict and (known := accepted.get(tuple(raw))) is not None:
                s = spec.normalize_known(raw, *known)
            else:
                s = spec.coerce(raw)
                spec.check_against(s, info.partition_keys, full=True, table=info.qualified)
                if type(raw) is dict and (order := spec.key_order(raw)) is not None:
                    accepted[tuple(raw)] = (order, list(order) == sorted(order))
        except InvalidSpecError as exc:
            raise InvalidSpecError(f"partition #{i}: {exc}") from exc
        canon = _bounded(spec.canonical_normal(s))
        if canon in seen:
            raise InvalidSpecError(f"partition #{i} {canon!r} is listed twice")
        seen[canon] = None
        out.append(s)
    return out, list(seen)

def set_done(info: TableInfo, partial_spec: SpecLike) -> spec.Spec:
    return set_done_canon(info, partial_spec)[0]


def set_done_canon(info: TableInfo, partial_spec: SpecLike) -> tuple[spec.Spec, str]:
    """:func:`set_done` and the spec's canonical string (computed once, here: a publish
    needs it too)."""
    s = spec.coerce(partial_spec)
    spec.check_against(s, info.partition_keys, full=False, table=info.qualified)
    return s, _bounded(spec.canonical_normal(s))


def refuse_size(draft: EventDraft, size: int, limit: int, what: str,
                location_field: str | None) -> NoReturn:
    """Refuse, before anything is logged, a message of ``size`` bytes over ``limit``.

    ``size`` is measured with the widest ids the message could get
    (publisher/templates.py), so the body the store logs is never larger.
    """
    if location_field is not None and draft.location is not None:
        culprit = f"{location_field} is {len(json.dumps(draft.location))} bytes"
    else:
        culprit = f"its partition values are {len(json.dumps(draft.partition_values))} bytes"
    raise ValidationError(
        f"{draft.table.qualified} {what}: the message would be {size} bytes, over the "
        f"limit of {limit} bytes (PN_MAX_MESSAGE_BYTES); {culprit}. Nothing was stored."
    )


def locations(
    locations: Sequence[str | None] | None, count: int, table: str
) -> list[str | None]:
    if locations is None:
        return [None] * count
    if isinstance(locations, str | bytes) or not isinstance(locations, Sequence):
        raise ValidationError(
            f"locations for {table} must be a list (one per partition), got "
            f"{type(locations).__name__} {locations!r:.80}"
        )
    if len(locations) != count:
        raise ValidationError(f"{count} partitions but {len(locations)} locations for {table}")
    return [
        None if loc is None else limits.text(loc, field=f"location #{i} of {table}")
        for i, loc in enumerate(locations)
    ]


def _bounded(canon: str) -> str:
    if len(canon) > MAX_SPEC_CHARS:
        raise InvalidSpecError(
            f"partition spec is {len(canon)} characters once escaped; at most {MAX_SPEC_CHARS}"
        )
    return canon
