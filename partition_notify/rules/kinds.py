"""The three kinds of completeness rule, as pure functions of the messages (no I/O).

A rule belongs to a *target* table (where its derived set-done goes) and
reads *input* tables. For every logged message of an input table,
:meth:`Kind.contributions` says which derived spec it counts towards and
under which *label* (a value of the rule's key, an hour, a day, a table);
:meth:`Kind.required` is the set of labels that makes a derived spec done.
The evaluator stores the labels seen so far, so arrival order and restarts
do not matter.

- ``all-of``: ``by`` keys give the derived spec; done when the ``key`` took
  every value of ``values`` (a partition, or a set-done naming the key).
- ``calendar``: ``key`` holds UTC hours (or calendar days); the derived spec
  is ``into`` = the local day of the hour in ``timezone`` (or the month of
  the day). A local day has 23, 24 or 25 UTC hours; UTC hour keys are what
  tells the repeated hour of a fall-back day apart.
- ``cross-table``: done when every input table has a set-done whose keys are
  exactly ``by``, with the same values.
- ``quiet``: done when no new partition with the ``by`` values arrived for
  ``quietSeconds``. Its labels are the partitions themselves; no set of them
  completes it (:data:`NEVER`), the evaluator's timer does (``rules/quiet.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from partition_notify.contract import (
    AddPartitionMessage,
    AnyMessage,
    PartitionWithdrawnMessage,
    SetDoneMessage,
    spec,
)
from partition_notify.core.errors import ValidationError
from partition_notify.core.limits import excerpt

KINDS = ("all-of", "calendar", "cross-table", "quiet")
#: The parameters each kind reads: a definition naming another (a typo such as
#: ``timeZone``, an option of another kind) is refused, not stored as the default.
PARAMS = {"all-of": ("inputs", "key", "values", "by"), "cross-table": ("inputs", "by"),
          "calendar": ("inputs", "key", "keyFormat", "into", "intoFormat", "timezone"),
          "quiet": ("inputs", "by", "quietSeconds")}
#: Longest quiet period (31 days: a month's partitions trickling in).
MAX_QUIET_SECONDS = 31 * 86400
#: What a quiet rule "requires": a label no input has (a canonical spec is never
#: empty), so counting never completes it; its quiet period does.
NEVER = frozenset({""})
#: Most values an all-of rule may require (and the most inputs of a cross-table rule).
MAX_VALUES = 1000
#: Longest label (value, hour, day or table name) the evaluator stores.
MAX_LABEL_CHARS = 300
#: Key formats of a calendar rule -> (unit, strftime pattern, strict shape).
FORMATS: dict[str, tuple[str, str, re.Pattern[str]]] = {
    "YYYYMMDDHH": ("hour", "%Y%m%d%H", re.compile(r"\d{10}")),
    "YYYY-MM-DDTHH": ("hour", "%Y-%m-%dT%H", re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}")),
    "YYYYMMDD": ("day", "%Y%m%d", re.compile(r"\d{8}")),
    "YYYY-MM-DD": ("day", "%Y-%m-%d", re.compile(r"\d{4}-\d{2}-\d{2}")),
    "YYYYMM": ("month", "%Y%m", re.compile(r"\d{6}")),
    "YYYY-MM": ("month", "%Y-%m", re.compile(r"\d{4}-\d{2}")),
}
_NEXT_UNIT = {"hour": "day", "day": "month"}

Contribution = tuple[str, str]  # (canonical derived spec, label)


def _specs_of(msg: AnyMessage) -> list[Mapping[str, str]]:
    if isinstance(msg, AddPartitionMessage):
        return list(msg.partitions)
    if isinstance(msg, SetDoneMessage):
        return [msg.partition_spec]
    if isinstance(msg, PartitionWithdrawnMessage):
        # What it took back, in the shapes an input was counted from: the evaluator
        # treats these labels as withdrawn (partition_notify/rules/retract.py).
        return [*msg.partitions, *withdrawn_set_dones(msg)]
    return []


def withdrawn_set_dones(msg: PartitionWithdrawnMessage) -> list[spec.Spec]:
    return [spec.parse(sd.spec) for sd in msg.set_dones]


def _bad(field: str, value: object, expected: str) -> ValidationError:
    if value is None:  # not given at all: "rule by None" read like a value
        return ValidationError(f"rule {field} is missing: expected {expected}")
    return ValidationError(f"rule {field} {excerpt(value)}: expected {expected}")


def _key_list(field: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not value or not all(
            isinstance(k, str) and k for k in value):
        raise _bad(field, value, "a non-empty list of partition keys")
    keys = tuple(k.lower() for k in value)
    if len(set(keys)) != len(keys):
        raise _bad(field, value, "each key once")
    return keys


def _has_keys(field: str, keys: Sequence[str], table: str,
              table_keys: Mapping[str, tuple[str, ...]]) -> None:
    missing = [k for k in keys if k not in table_keys[table]]
    if missing:
        raise _bad(field, list(keys), f"partition keys of {table} "
                   f"({', '.join(table_keys[table])}); "
                   # Half the excerpt: the value before already quotes these keys.
                   f"{excerpt(missing, shown=', '.join(missing), limit=60)} is not one")


@dataclass(frozen=True)
class Kind:
    """A rule's definition: its target, inputs and kind-specific parameters."""

    target: str
    inputs: tuple[str, ...]

    kind = ""

    def contributions(self, table: str, msg: AnyMessage) -> Iterator[Contribution]:
        raise NotImplementedError

    def required(self, derived: str) -> frozenset[str]:
        raise NotImplementedError

    def to_json(self) -> dict[str, object]:
        raise NotImplementedError


@dataclass(frozen=True)
class AllOf(Kind):
    key: str
    values: tuple[str, ...]
    by: tuple[str, ...]

    kind = "all-of"

    def contributions(self, table: str, msg: AnyMessage) -> Iterator[Contribution]:
        if table not in self.inputs:
            return
        for s in _specs_of(msg):
            if self.key in s and s[self.key] in self.values and all(b in s for b in self.by):
                yield spec.canonical({b: s[b] for b in self.by}), s[self.key]

    def required(self, derived: str) -> frozenset[str]:
        return frozenset(self.values)

    def to_json(self) -> dict[str, object]:
        return {"inputs": list(self.inputs), "key": self.key, "values": list(self.values),
                "by": list(self.by)}


@dataclass(frozen=True)
class CrossTable(Kind):
    by: tuple[str, ...]

    kind = "cross-table"

    def contributions(self, table: str, msg: AnyMessage) -> Iterator[Contribution]:
        # Only a set-done of exactly the ``by`` keys says the input's spec is done:
        # a finer one covers part of it, a coarser one names no value to match.
        if table not in self.inputs:
            return
        done = ([msg.partition_spec] if isinstance(msg, SetDoneMessage)
                else withdrawn_set_dones(msg) if isinstance(msg, PartitionWithdrawnMessage)
                else [])
        for s in done:
            if set(s) == set(self.by):
                yield spec.canonical(s), table

    def required(self, derived: str) -> frozenset[str]:
        return frozenset(self.inputs)

    def to_json(self) -> dict[str, object]:
        return {"inputs": list(self.inputs), "by": list(self.by)}


@dataclass(frozen=True)
class Quiet(Kind):
    by: tuple[str, ...]
    seconds: int

    kind = "quiet"

    def contributions(self, table: str, msg: AnyMessage) -> Iterator[Contribution]:
        # Only a new partition restarts the quiet period; a set-done announces none.
        if table not in self.inputs or not isinstance(msg, AddPartitionMessage):
            return
        for s in msg.partitions:
            if all(b in s for b in self.by):
                yield spec.canonical({b: s[b] for b in self.by}), spec.canonical(s)

    def required(self, derived: str) -> frozenset[str]:
        return NEVER

    def to_json(self) -> dict[str, object]:
        return {"inputs": list(self.inputs), "by": list(self.by), "quietSeconds": self.seconds}


@dataclass(frozen=True)
class Calendar(Kind):
    key: str
    key_format: str
    into: str
    into_format: str
    timezone: str

    kind = "calendar"

    def contributions(self, table: str, msg: AnyMessage) -> Iterator[Contribution]:
        if table not in self.inputs:
            return
        for s in _specs_of(msg):
            moment = parse_key(s.get(self.key), self.key_format)
            if moment is not None:
                yield spec.canonical({self.into: self._period(moment)}), s[self.key]

    def _period(self, moment: datetime) -> str:
        """The local day of a UTC hour, or the month of a day, in ``into_format``."""
        if FORMATS[self.key_format][0] == "hour":
            moment = moment.replace(tzinfo=UTC).astimezone(ZoneInfo(self.timezone))
        return moment.strftime(FORMATS[self.into_format][1])

    def required(self, derived: str) -> frozenset[str]:
        value = spec.parse(derived)[self.into]
        start = parse_key(value, self.into_format)
        assert start is not None  # derived by _period in this very format
        pattern = FORMATS[self.key_format][1]
        if FORMATS[self.key_format][0] == "day":  # every day of the month
            first = start.date()
            days = (_next_month(first) - first).days
            return frozenset((first + timedelta(d)).strftime(pattern) for d in range(days))
        return frozenset(h.strftime(pattern) for h in utc_hours(start.date(), self.timezone))

    def to_json(self) -> dict[str, object]:
        return {"inputs": list(self.inputs), "key": self.key, "keyFormat": self.key_format,
                "into": self.into, "intoFormat": self.into_format, "timezone": self.timezone}


def utc_hours(day: date, timezone: str) -> list[datetime]:
    """The UTC hours (naive) of the local ``day`` in ``timezone``: 23, 24 or 25."""
    tz = ZoneInfo(timezone)
    start = datetime(day.year, day.month, day.day, tzinfo=tz).astimezone(UTC)
    nxt = day + timedelta(days=1)
    end = datetime(nxt.year, nxt.month, nxt.day, tzinfo=tz).astimezone(UTC)
    hours = int((end - start).total_seconds() // 3600)
    return [(start + timedelta(hours=h)).replace(tzinfo=None) for h in range(hours)]


def _next_month(d: date) -> date:
    return date(d.year + (d.month == 12), d.month % 12 + 1, 1)


def parse_key(value: str | None, fmt: str) -> datetime | None:
    """``value`` in the key format ``fmt`` as a naive datetime; None when it is not."""
    if value is None or not FORMATS[fmt][2].fullmatch(value):
        return None
    try:
        return datetime.strptime(value, FORMATS[fmt][1])
    except ValueError:  # 2026-02-30, hour 24
        return None


def check_params(kind: str, params: Mapping[str, object]) -> None:
    """A new definition's parameters are all ones ``kind`` reads (stored rules are not
    checked again: an older release may have kept one it ignores)."""
    if kind in PARAMS and (extra := sorted(set(params) - set(PARAMS[kind]))):
        raise _bad(extra[0], params[extra[0]],
                   f"no {extra[0]!r} for a {kind} rule (its parameters: "
                   f"{', '.join(PARAMS[kind])})")


def build(kind: str, target: str, params: Mapping[str, object],
          table_keys: Mapping[str, tuple[str, ...]]) -> Kind:
    """Validate a definition against the tables' keys; ``table_keys`` holds every table named.

    Raises :class:`ValidationError` naming the field, the value and what was expected.
    """
    if kind not in KINDS:
        raise _bad("kind", kind, " or ".join(KINDS))
    raw_inputs = params.get("inputs") or [target]
    if not isinstance(raw_inputs, list | tuple) or not all(isinstance(t, str) for t in raw_inputs):
        raise _bad("inputs", raw_inputs, "a list of db.table names")
    inputs = tuple(raw_inputs)
    if len(set(inputs)) != len(inputs) or len(inputs) > MAX_VALUES:
        raise _bad("inputs", list(inputs), f"distinct tables, at most {MAX_VALUES}")
    if kind == "cross-table":
        return _cross_table(target, inputs, params, table_keys)
    if len(inputs) != 1:
        raise _bad("inputs", list(inputs), f"one table for a {kind} rule")
    if kind == "all-of":
        return _all_of(target, inputs, params, table_keys)
    if kind == "quiet":
        return _quiet(target, inputs, params, table_keys)
    return _calendar(target, inputs, params, table_keys)


def _all_of(target: str, inputs: tuple[str, ...], params: Mapping[str, object],
            table_keys: Mapping[str, tuple[str, ...]]) -> AllOf:
    key = params.get("key")
    if not isinstance(key, str) or not key:
        raise _bad("key", key, "the partition key whose values are counted, e.g. region")
    key = key.lower()
    values = params.get("values")
    if (not isinstance(values, list | tuple) or not values or len(values) > MAX_VALUES
            or not all(isinstance(v, str) and 0 < len(v) <= MAX_LABEL_CHARS for v in values)
            or len(set(values)) != len(values)):
        raise _bad("values", values, f"1 to {MAX_VALUES} distinct values of 1 to "
                   f"{MAX_LABEL_CHARS} characters, e.g. us,eu,apac")
    by = _key_list("by", params.get("by"))
    if key in by:
        raise _bad("by", list(by), f"keys other than the counted key {key!r}")
    _has_keys("key", [key], inputs[0], table_keys)
    _has_keys("by", by, inputs[0], table_keys)  # each named as the option the user gave
    _has_keys("by", by, target, table_keys)
    return AllOf(target, inputs, key, tuple(values), by)


def _cross_table(target: str, inputs: tuple[str, ...], params: Mapping[str, object],
                 table_keys: Mapping[str, tuple[str, ...]]) -> CrossTable:
    if target in inputs:
        raise _bad("inputs", list(inputs), f"tables other than the rule's own table {target}")
    by = _key_list("by", params.get("by"))
    for table in (target, *inputs):
        _has_keys("by", by, table, table_keys)
    return CrossTable(target, inputs, by)


def _calendar(target: str, inputs: tuple[str, ...], params: Mapping[str, object],
              table_keys: Mapping[str, tuple[str, ...]]) -> Calendar:
    key, into = params.get("key"), params.get("into")
    key_format, into_format = params.get("keyFormat"), params.get("intoFormat")
    tz = params.get("timezone", "UTC")
    if not isinstance(key, str) or not key:
        raise _bad("key", key, "the partition key holding hours or days, e.g. hour")
    if not isinstance(into, str) or not into:
        raise _bad("into", into, "the partition key of the derived day or month, e.g. datestamp")
    if into.lower() == key.lower():  # the derived period would overwrite the counted one
        raise _bad("into", into, f"a partition key other than key {key.lower()!r}")
    hour_day = [f for f, (u, _, _) in FORMATS.items() if u != "month"]
    if key_format not in hour_day:
        raise _bad("keyFormat", key_format, " or ".join(hour_day))
    unit = FORMATS[key_format][0]
    nxt = [f for f, (u, _, _) in FORMATS.items() if u == _NEXT_UNIT[unit]]
    if into_format not in nxt:
        raise _bad("intoFormat", into_format, f"a {_NEXT_UNIT[unit]} format for {unit} keys: "
                   + " or ".join(nxt))
    try:
        ZoneInfo(str(tz))
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a folder such as "America"
        raise _bad("timezone", tz, "an IANA time zone, e.g. Europe/Berlin") from None
    _has_keys("key", [key.lower()], inputs[0], table_keys)
    _has_keys("into", [into.lower()], target, table_keys)
    return Calendar(target, inputs, key.lower(), key_format, into.lower(), into_format, str(tz))


def _quiet(target: str, inputs: tuple[str, ...], params: Mapping[str, object],
           table_keys: Mapping[str, tuple[str, ...]]) -> Quiet:
    by = _key_list("by", params.get("by"))
    seconds = params.get("quietSeconds")
    if (not isinstance(seconds, int) or isinstance(seconds, bool)
            or not 1 <= seconds <= MAX_QUIET_SECONDS):
        raise _bad("quietSeconds", seconds, f"whole seconds from 1 to {MAX_QUIET_SECONDS} "
                   "(31 days), e.g. 1800")
    _has_keys("by", by, inputs[0], table_keys)
    _has_keys("by", by, target, table_keys)
    return Quiet(target, inputs, by, seconds)
