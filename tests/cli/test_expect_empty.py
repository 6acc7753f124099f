"""``expect status`` with no verdicts (and ``expect list`` with no expectations) says so.

Before (session 24): they printed nothing at all, exit 0: a user could not tell "no
verdicts yet" from a wrong name or a store they did not mean. Now stdout stays JSON lines
(none: zero lines, what a script reading them expects) and one stderr line says there
are none and why; exit 0. Real SQLite store, the CLI's main().
"""

from __future__ import annotations

import json

import pytest

from partition_notify.cli import main


def _run(url: str, *argv: str) -> int:
    try:
        return main(["--store-url", url, *argv])
    except SystemExit as exit_:
        return int(exit_.code or 0)


@pytest.fixture
def daily(sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert _run(sqlite_url, "register", "db.t", "--keys", "ds") == 0
    assert _run(sqlite_url, "expect", "add", "db.t", "--name", "daily", "--spec-template",
                "ds={{ ds_nodash }}", "--cron", "0 0 * * *", "--deadline", "06:00") == 0
    capsys.readouterr()
    return sqlite_url


def test_no_verdicts_is_said(daily: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(daily, "expect", "status", "db.t", "daily") == 0
    out, err = capsys.readouterr()
    assert out == "", "stdout is JSON lines: none is zero lines"
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("no verdicts yet for expectation 'daily' of db.t"), lines


def test_no_expectations_is_said(daily: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(daily, "expect", "list") == 0
    assert [json.loads(line)["name"] for line in capsys.readouterr().out.splitlines()] == [
        "daily"]
    assert _run(daily, "register", "db.u", "--keys", "ds") == 0
    capsys.readouterr()
    assert _run(daily, "expect", "list", "db.u") == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip() == "no expectations of db.u (partition-notify expect add db.u ...)", err
