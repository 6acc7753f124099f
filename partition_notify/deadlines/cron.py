"""A 5-field crontab evaluated in local wall-clock time of an IANA zone.

Why not APScheduler's CronTrigger: on a DST day it skips fires
(``0 0 * * *`` in Europe/Berlin: from 2026-03-29 00:00:01 its next fire is
03-31, not 03-30; tests/deadlines/test_schedule.py) and fires an ambiguous
wall time twice. Here each matching local date and time gives one instant:
a wall time skipped by a jump forward counts as the instant after the jump
(``zoneinfo``'s fold=0 reading), an ambiguous one fires once, at its first
occurrence. Fields: minute hour day-of-month month day-of-week, each ``*``,
``n``, ``a-b``, ``*/s``, ``a-b/s`` or comma lists; month and weekday names
(``jan``, ``mon``); weekday 0 and 7 are Sunday. When both day fields are
restricted a day matches either (cron's rule).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from partition_notify.core.errors import ValidationError
from partition_notify.core.limits import excerpt

#: Longest schedule: its column (pn_expectations.cron) holds this many characters.
MAX_CRON_CHARS = 128

_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
#: (name, low, high, names) of the five fields.
_FIELDS = (
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day of month", 1, 31, None),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
#: How far to look for a matching day (``0 0 29 2 1`` can take decades).
MAX_YEARS = 30


def _value(text: str, low: int, high: int, names: list[str] | None, name: str) -> int:
    t = text.lower()
    if names and t in names:
        return names.index(t) + (1 if name == "month" else 0)
    if not t.isdigit():
        raise ValueError(f"{name} {text!r} is not a number")
    v = int(t)
    if not low <= v <= high:
        raise ValueError(f"{name} {v} is outside {low}-{high}")
    return v


def _field(text: str, low: int, high: int, names: list[str] | None, name: str) -> set[int]:
    out: set[int] = set()
    for part in text.split(","):
        rng, _, step_s = part.partition("/")
        step = int(step_s) if step_s.isdigit() and int(step_s) > 0 else None
        if step_s and step is None:
            raise ValueError(f"{name} step {step_s!r} is not a positive number")
        if rng == "*":
            a, b = low, high
        elif "-" in rng:
            lo, _, hi = rng.partition("-")
            a, b = _value(lo, low, high, names, name), _value(hi, low, high, names, name)
            if a > b:
                raise ValueError(f"{name} range {rng!r} runs backwards")
        else:
            a = _value(rng, low, high, names, name)
            b = high if step else a
        out.update(range(a, b + 1, step or 1))
    return out


class Cron:
    def __init__(self, expr: str, tz: ZoneInfo) -> None:
        parts = expr.split() if isinstance(expr, str) else []
        if len(parts) != 5:
            raise ValidationError(
                f"schedule {excerpt(expr)}: expected a 5-field crontab 'minute hour day month "
                "weekday', e.g. '0 0 * * *'"
            )
        try:
            sets = [
                _field(p, lo, hi, nm, n) for p, (n, lo, hi, nm) in zip(parts, _FIELDS, strict=True)
            ]
        except ValueError as exc:
            raise ValidationError(f"schedule {excerpt(expr)}: {exc}") from exc
        if len(expr) > MAX_CRON_CHARS:
            raise ValidationError(f"schedule {excerpt(expr)}: at most {MAX_CRON_CHARS} "
                                  "characters")
        self.expr, self.tz = expr, tz
        self.minutes, self.hours, self.doms, self.months = (sorted(s) for s in sets[:4])
        self.dows = {d % 7 for d in sets[4]}
        self._dom_star, self._dow_star = parts[2] == "*", parts[4] == "*"

    def _day_matches(self, d: date) -> bool:
        if d.month not in self.months:
            return False
        dom, dow = d.day in self.doms, (d.isoweekday() % 7) in self.dows
        if self._dom_star or self._dow_star:
            return dom and dow
        return dom or dow

    def _fires_on(self, d: date, reverse: bool = False) -> Iterator[datetime]:
        hours = reversed(self.hours) if reverse else self.hours
        for h in hours:
            for m in reversed(self.minutes) if reverse else self.minutes:
                local = datetime.combine(d, time(h, m), tzinfo=self.tz)
                yield local.astimezone(UTC).astimezone(self.tz)

    def next_after(self, instant: datetime) -> datetime:
        """The first fire strictly after ``instant``, in the schedule's zone."""
        start = instant.astimezone(self.tz).date() - timedelta(days=1)
        for n in range(MAX_YEARS * 366):
            d = start + timedelta(days=n)
            if self._day_matches(d):
                for fire in self._fires_on(d):
                    if fire > instant:
                        return fire
        raise ValidationError(f"schedule {excerpt(self.expr)} never fires within {MAX_YEARS} years")

    def previous_before(self, instant: datetime) -> datetime:
        """The last fire strictly before ``instant``."""
        start = instant.astimezone(self.tz).date() + timedelta(days=1)
        for n in range(MAX_YEARS * 366):
            d = start - timedelta(days=n)
            if self._day_matches(d):
                for fire in self._fires_on(d, reverse=True):
                    if fire < instant:
                        return fire
        raise ValidationError(f"schedule {excerpt(self.expr)} never fired within {MAX_YEARS} years")
