"""Schedules: cron in an IANA zone, deadlines, templates — DST included."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from partition_notify.core.errors import ValidationError
from partition_notify.deadlines.schedule import Deadline, Schedule, check_template, render
from tests.support.accounts import ROOT


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


def deadlines(s: Schedule, start: datetime, end: datetime) -> list[tuple[str, str]]:
    return [(i.key, i.deadline.astimezone(UTC).isoformat()) for i in s.instances(start, end)]


def test_daily_berlin_deadline_follows_dst_both_ways() -> None:
    s = Schedule("0 0 * * *", "Europe/Berlin", Deadline.parse("06:00"))
    assert deadlines(s, utc(2026, 3, 27, 6), utc(2026, 3, 30, 6)) == [
        ("2026-03-27T00:00:00+01:00", "2026-03-28T05:00:00+00:00"),  # CET
        ("2026-03-28T00:00:00+01:00", "2026-03-29T04:00:00+00:00"),  # CEST from 29 March
        ("2026-03-29T00:00:00+01:00", "2026-03-30T04:00:00+00:00"),  # midnight still CET
    ]
    assert deadlines(s, utc(2026, 10, 23, 6), utc(2026, 10, 26, 6)) == [
        ("2026-10-23T00:00:00+02:00", "2026-10-24T04:00:00+00:00"),
        ("2026-10-24T00:00:00+02:00", "2026-10-25T05:00:00+00:00"),  # CET from 25 October
        ("2026-10-25T00:00:00+02:00", "2026-10-26T05:00:00+00:00"),
    ]


def test_skipped_and_repeated_wall_times_fire_once() -> None:
    s = Schedule("30 2 * * *", "Europe/Berlin", Deadline.parse("+1h"))
    spring = [k for k, _ in deadlines(s, utc(2026, 3, 28), utc(2026, 3, 31))]
    assert spring == ["2026-03-27T02:30:00+01:00", "2026-03-28T02:30:00+01:00",
                      "2026-03-29T03:30:00+02:00"]  # 02:30 did not exist: the moment after
    autumn = [k for k, _ in deadlines(s, utc(2026, 10, 24), utc(2026, 10, 27))]
    assert autumn == ["2026-10-23T02:30:00+02:00", "2026-10-24T02:30:00+02:00",
                      "2026-10-25T02:30:00+02:00"]  # 02:30 happened twice: once


def test_offsets_are_elapsed_time_and_hourly_schedules() -> None:
    s = Schedule("0 * * * *", "UTC", Deadline.parse("+30m"))
    assert deadlines(s, utc(2026, 1, 1, 0), utc(2026, 1, 1, 2)) == [
        ("2025-12-31T23:00:00+00:00", "2026-01-01T00:30:00+00:00"),
        ("2026-01-01T00:00:00+00:00", "2026-01-01T01:30:00+00:00"),
    ]
    assert s.next_deadline(utc(2026, 1, 1, 1, 30)) == utc(2026, 1, 1, 2, 30)


def test_weekday_names_and_either_day_rule() -> None:
    s = Schedule("0 0 1 * mon", "UTC", Deadline.parse("+1s"))
    keys = [k[:10] for k, _ in deadlines(s, utc(2026, 6, 28), utc(2026, 7, 14))]
    # Intervals end at the next fire: Mon 29 June, Wed 1 July (the 1st), Mon 6 and 13 July.
    assert keys == ["2026-06-22", "2026-06-29", "2026-07-01", "2026-07-06"]


def test_template_variables() -> None:
    s = Schedule("0 0 * * *", "Asia/Tokyo", Deadline.parse("06:00"))
    inst = next(s.instances(utc(2026, 2, 27), utc(2026, 3, 2)))
    out = render("ds={{ds}}/n={{ ds_nodash }}/h={{hour}}/next={{ next_ds_nodash }}",
                 inst.logical_date, inst.interval_end)
    assert out == "ds=2026-02-27/n=20260227/h=00/next=20260228"


@pytest.mark.parametrize(("call", "fragment"), [
    (lambda: Deadline.parse("6"), "expected a local time HH:MM"),
    (lambda: Deadline.parse("24:00"), "expected a local time HH:MM"),
    (lambda: Deadline.parse("+40d"), "expected a local time HH:MM"),
    (lambda: Deadline.parse("+999h"), "more than 31 days"),
    (lambda: Schedule("0 0 * *", "UTC", Deadline.parse("+1h")), "5-field crontab"),
    (lambda: Schedule("0 25 * * *", "UTC", Deadline.parse("+1h")), "hour 25 is outside 0-23"),
    (lambda: Schedule("0 0 * * xyz", "UTC", Deadline.parse("+1h")), "'xyz' is not a number"),
    (lambda: Schedule("0 0 * * *", "Mars/Base", Deadline.parse("+1h")), "not an IANA zone"),
    (lambda: Schedule("0 0 30 2 *", "UTC", Deadline.parse("+1h")).next_deadline(
        utc(2026, 1, 1)), "never fires"),
    (lambda: check_template("d={{ dss }}"), "unknown variable(s) ['dss']"),
    (lambda: check_template("d={{ ds"), "not a {{ variable }}"),
    (lambda: check_template(" "), "spec template is empty"),
])
def test_bad_schedule_input_is_specific(call: object, fragment: str) -> None:
    with pytest.raises(ValidationError) as exc:
        call()  # type: ignore[operator]
    assert fragment in str(exc.value)


@pytest.mark.parametrize("name", ["America", "Europe/" + "B" * 300, "A" * 5000])
def test_a_zone_that_is_a_folder_or_too_long_is_a_bad_zone_in_one_line(
        name: str, tmp_path: Path) -> None:
    # zoneinfo reads a file named after the zone: a folder is IsADirectoryError, a name
    # past the filesystem's limit "File name too long": both OSError, both tracebacks.
    with pytest.raises(ValidationError, match="not an IANA zone name"):
        Schedule("0 0 * * *", name, Deadline.parse("06:00"))
    env = {**os.environ, "PN_STORE_URL": f"sqlite:///{tmp_path}/store.db",
           "PN_TRANSPORT_URL": "embedded://", "PYTHONPATH": str(ROOT)}
    pn = [sys.executable, "-m", "partition_notify.cli"]
    subprocess.run([*pn, "register", "sales.orders", "--keys", "datestamp"], env=env,
                   check=True, capture_output=True, timeout=60)
    out = subprocess.run([*pn, "expect", "add", "sales.orders", "--name", "daily",
                          "--spec-template", "datestamp={{ ds_nodash }}", "--cron", "0 0 * * *",
                          "--deadline", "06:00", "--timezone", name],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stderr[-500:]
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr[-500:]
    assert "not an IANA zone name" in out.stderr
