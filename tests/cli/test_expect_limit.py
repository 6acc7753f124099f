"""``expect status --limit`` is an integer from 1 to MAX_STATUS_LIMIT (session 18).

Before: 99999999999999999999999 ended in a SQLAlchemy traceback (OverflowError),
and 0 or -1 were accepted (-1 is "no limit" to SQLite).
"""

from __future__ import annotations

import pytest

from partition_notify.cli import main
from partition_notify.cli.deadlines import MAX_STATUS_LIMIT


def _run(url: str, *argv: str) -> int:
    try:
        return main(["--store-url", url, *argv])
    except SystemExit as exit_:
        return int(exit_.code or 0)


@pytest.mark.parametrize("limit", ["0", "-1", str(MAX_STATUS_LIMIT + 1),
                                   "99999999999999999999999", "x"])
def test_a_limit_out_of_range_is_a_usage_error(limit: str, sqlite_url: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(sqlite_url, "register", "db.t", "--keys", "ds") == 0
    assert _run(sqlite_url, "expect", "add", "db.t", "--name", "daily", "--spec-template",
                "ds={{ ds_nodash }}", "--cron", "0 0 * * *", "--deadline", "06:00") == 0
    capsys.readouterr()
    assert _run(sqlite_url, "expect", "status", "db.t", "daily", "--limit", limit) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--limit" in err, err
    assert _run(sqlite_url, "expect", "status", "db.t", "daily", "--limit", "5") == 0
