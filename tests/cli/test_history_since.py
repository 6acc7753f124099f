"""``history --since-seconds N``: only set-dones of the last N seconds; 0 is "none yet",
not "everything" (before session 18 a 0 was read as the option left out)."""

from __future__ import annotations

import json

import pytest

from partition_notify import build_app
from partition_notify.cli import main


def _history(url: str, capsys: pytest.CaptureFixture[str], *extra: str) -> list[str]:
    capsys.readouterr()
    assert main(["--store-url", url, "history", "db.t", *extra]) == 0
    out = capsys.readouterr().out
    return [json.loads(line)["partitionSpec"]["ds"] for line in out.splitlines()]


def test_since_seconds_zero_prints_nothing_older_and_the_rest_still_works(
        sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with build_app(store_url=sqlite_url) as app:
        app.publisher.register_table("db", "t", ["ds"])
        app.publisher.send_mark_set_done("db", "t", "ds=1")
    assert _history(sqlite_url, capsys, "--since-seconds", "0") == []
    assert _history(sqlite_url, capsys, "--since-seconds", "3600") == ["1"]
    assert _history(sqlite_url, capsys) == ["1"]
