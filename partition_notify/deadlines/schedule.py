"""Expectation schedules: spec templates, cron in a time zone, and deadlines.

Semantics (Airflow's): the cron's fire times, read in the schedule's IANA
time zone, cut time into intervals ``[t_i, t_i+1)``. Instance ``i`` is the
data of that interval; its **logical date** is ``t_i`` (the interval start),
and the template variables come from it. Its data can be complete at
``t_i+1`` at the earliest, so the **deadline** counts from there:

* ``HH:MM`` — the first local ``HH:MM`` at or after ``t_i+1``: with a daily
  ``0 0 * * *`` schedule and ``06:00``, the partition of 21 November
  (``ds=2026-11-21``) is due on 22 November at 06:00 local time;
* ``+6h`` (``+90m``, ``+1h30m``, ``+3600s``) — that long after ``t_i+1``
  (elapsed time, so a DST change does not stretch it); ``+1s`` to ``+744h``: zero
  would make the deadline the moment the data can be complete at the earliest.

Local times follow the zone's rules (``zoneinfo``): a wall time skipped by a
DST jump counts as the moment after the jump, an ambiguous one as its first
occurrence.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from partition_notify.core import limits
from partition_notify.core.errors import ValidationError
from partition_notify.deadlines.cron import Cron

#: Longest spec template: its column (pn_expectations.spec_template) holds this many.
MAX_TEMPLATE_CHARS = 1000

#: Template variables, from the logical date L and the interval end N.
VARIABLES: dict[str, str] = {
    "ds": "L as YYYY-MM-DD",
    "ds_nodash": "L as YYYYMMDD",
    "ts": "L as ISO 8601 with offset",
    "ts_nodash": "L as YYYYMMDDTHHMMSS",
    "year": "L's year, YYYY",
    "month": "L's month, MM",
    "day": "L's day, DD",
    "hour": "L's hour, HH",
    "minute": "L's minute, MM",
    "next_ds": "N (the interval end) as YYYY-MM-DD",
    "next_ds_nodash": "N as YYYYMMDD",
}
_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_TIME = re.compile(r"([01]?[0-9]|2[0-3]):([0-5][0-9])")
# ASCII digits, at most 7 a part (the longest offset is 2,678,400 s): int() of
# thousands of digits raises, and Unicode digits are not a deadline.
_OFFSET = re.compile(r"\+(?:([0-9]{1,7})h)?(?:([0-9]{1,7})m)?(?:([0-9]{1,7})s)?")
#: Longest offset accepted: a deadline further out than this is a typo.
MAX_OFFSET_SECONDS = 31 * 86400
#: Shortest offset accepted (see Deadline.parse).
MIN_OFFSET_SECONDS = 1
_RANGE = (f"an offset must be from +{MIN_OFFSET_SECONDS}s to +{MAX_OFFSET_SECONDS // 3600}h "
          f"({MAX_OFFSET_SECONDS // 86400} days) after the interval end")


@dataclass(frozen=True, slots=True)
class Deadline:
    """Either a local wall time (``06:00``) or an offset in seconds after the interval."""

    at: time | None = None
    offset_seconds: int | None = None

    @classmethod
    def parse(cls, text: str, *, stored: bool = False) -> Deadline:
        """``stored``: read back from the store, where a zero offset may predate its
        refusal; it still loads (and is due as the interval ends)."""
        raw = text.strip() if isinstance(text, str) else ""
        m = _TIME.fullmatch(raw)
        if m:
            return cls(at=time(int(m.group(1)), int(m.group(2))))
        m = _OFFSET.fullmatch(raw)
        if m and any(m.groups()):
            h, mi, s = (int(g or 0) for g in m.groups())
            seconds = h * 3600 + mi * 60 + s
            if seconds > MAX_OFFSET_SECONDS:
                raise ValidationError(
                    f"deadline {text[:40]!r} is more than {MAX_OFFSET_SECONDS // 86400} days "
                    f"after the interval; {_RANGE}"
                )
            if seconds < MIN_OFFSET_SECONDS and not stored:
                # Due the moment the interval ends, when its data can be complete at the
                # earliest: every instance would be late unless done before it closed.
                raise ValidationError(f"deadline {text[:40]!r}: no time after the interval "
                                      f"end; {_RANGE}")
            return cls(offset_seconds=seconds)
        raise ValidationError(
            f"deadline {text[:40]!r}: expected a local time HH:MM (e.g. 06:00) or an offset "
            "after the interval end like +6h, +90m, +1h30m, +3600s"
        )

    def text(self) -> str:
        if self.at is not None:
            return self.at.strftime("%H:%M")
        s = self.offset_seconds or 0
        return f"+{s // 3600}h{s % 3600 // 60}m{s % 60}s"

    def to_json(self) -> dict[str, object]:
        return {"deadline": self.text()}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Deadline:
        return cls.parse(str(data["deadline"]), stored=True)

    def due(self, interval_end: datetime) -> datetime:
        if self.offset_seconds is not None:
            return interval_end + timedelta(seconds=self.offset_seconds)
        assert self.at is not None and interval_end.tzinfo is not None
        tz = interval_end.tzinfo
        local = interval_end.astimezone(tz)
        for days in (0, 1, 2):
            day = local.date() + timedelta(days=days)
            # Round-trip through UTC: a skipped wall time lands after the jump.
            candidate = datetime.combine(day, self.at, tzinfo=tz)
            candidate = candidate.astimezone(ZoneInfo("UTC")).astimezone(tz)
            if candidate >= interval_end:
                return candidate
        raise AssertionError("unreachable: a wall time recurs within two days")


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    # OSError: zoneinfo opens a file named after the zone; "America" is a folder
    # (IsADirectoryError) and a name past the filesystem's limit is "too long".
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValidationError(
            f"time zone {limits.excerpt(name)} is not an IANA zone name (e.g. UTC, Europe/Berlin)"
        ) from exc


def variables(logical: datetime, end: datetime) -> dict[str, str]:
    return {
        "ds": logical.strftime("%Y-%m-%d"),
        "ds_nodash": logical.strftime("%Y%m%d"),
        "ts": logical.isoformat(),
        "ts_nodash": logical.strftime("%Y%m%dT%H%M%S"),
        "year": logical.strftime("%Y"),
        "month": logical.strftime("%m"),
        "day": logical.strftime("%d"),
        "hour": logical.strftime("%H"),
        "minute": logical.strftime("%M"),
        "next_ds": end.strftime("%Y-%m-%d"),
        "next_ds_nodash": end.strftime("%Y%m%d"),
    }


def check_template(template: str) -> str:
    if not isinstance(template, str) or not template.strip():
        raise ValidationError("spec template is empty; expected e.g. 'datestamp={{ ds_nodash }}'")
    # A spec value may hold a NUL (escaped in specs), but the template is stored as
    # text: SQLite kept it, PostgreSQL refused it as a store failure.
    limits.text(template, field="spec template")
    if len(template) > MAX_TEMPLATE_CHARS:
        raise ValidationError(f"spec template {limits.excerpt(template)}: at most "
                              f"{MAX_TEMPLATE_CHARS} characters")
    unknown = sorted({m.group(1) for m in _VAR.finditer(template)} - VARIABLES.keys())
    if unknown:
        raise ValidationError(
            f"spec template {limits.excerpt(template)} uses unknown variable(s) {unknown}; "
            f"known: {', '.join(VARIABLES)}"
        )
    rest = _VAR.sub("", template)
    if "{{" in rest or "}}" in rest:
        raise ValidationError(f"spec template {limits.excerpt(template)} has a '{{{{' or "
                              "'}}' that is not a {{ variable }} (a name like ds_nodash)")
    return template


def render(template: str, logical: datetime, end: datetime) -> str:
    values = variables(logical, end)
    return _VAR.sub(lambda m: values[m.group(1)], template)


@dataclass(frozen=True, slots=True)
class Instance:
    logical_date: datetime
    interval_end: datetime
    deadline: datetime

    @property
    def key(self) -> str:
        return self.logical_date.isoformat()


class Schedule:
    """A cron in a time zone plus a deadline: enumerates instances by their deadline."""

    def __init__(self, cron: str, tz: str, deadline: Deadline) -> None:
        self.cron, self.tz, self.deadline = cron, tz, deadline
        self.zone = zone(tz)
        self._cron = Cron(cron, self.zone)

    def _max_delay(self) -> timedelta:
        if self.deadline.offset_seconds is not None:
            return timedelta(seconds=self.deadline.offset_seconds)
        return timedelta(days=1, hours=2)  # a wall time recurs within a day (+ DST)

    def instances(self, start: datetime, end: datetime) -> Iterator[Instance]:
        """Instances whose deadline falls in ``(start, end]``, oldest first."""
        interval_end = self._cron.next_after(start - self._max_delay() - timedelta(seconds=1))
        logical = self._cron.previous_before(interval_end)
        while True:
            due = self.deadline.due(interval_end)
            if due > end:
                return  # deadlines grow with the interval end
            if due > start:
                yield Instance(logical, interval_end, due)
            logical, interval_end = interval_end, self._cron.next_after(interval_end)

    def next_deadline(self, after: datetime) -> datetime | None:
        """The first deadline strictly after ``after`` (to schedule the next check)."""
        for inst in self.instances(after, after + timedelta(days=400)):
            return inst.deadline
        return None
