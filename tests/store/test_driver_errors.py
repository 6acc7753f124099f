"""An error of SQLite's driver inside a unit of work is ours, like SQLAlchemy's (session 18).

The log's bulk inserts (store/append_rows.py ``insert_many``) hand rows to the
driver directly; an error there (a damaged page, a trigger an operator added)
escaped as a bare ``sqlite3`` exception and `partition-notify announce` ended in a
traceback. A trigger makes the driver fail on the partitions' insert every time.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from partition_notify import build_app
from partition_notify.core.errors import PartitionNotifyError
from tests.support.accounts import ROOT

TRIGGER = ("CREATE TRIGGER refuse_partitions BEFORE INSERT ON pn_partitions "
           "BEGIN SELECT RAISE(FAIL, 'partitions are frozen by the operator'); END")


@pytest.fixture
def frozen(sqlite_url: str) -> str:
    with build_app(store_url=sqlite_url) as app:
        app.publisher.register_table("db", "t", ["ds"])
    conn = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    conn.execute(TRIGGER)
    conn.commit()
    conn.close()
    return sqlite_url


def test_a_driver_error_in_the_log_append_is_ours_and_nothing_is_logged(frozen: str) -> None:
    with build_app(store_url=frozen) as app:
        with pytest.raises(PartitionNotifyError, match="partitions are frozen"):
            app.publisher.announce_partitions("db", "t", ["ds=1", "ds=2"])
        assert app.store.log.events_after(0, 10) == []


def test_the_cli_says_it_in_one_line(frozen: str) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PN_")}
    done = subprocess.run(
        [sys.executable, "-m", "partition_notify.cli", "--store-url", frozen,
         "announce", "db.t", "ds=1"],
        cwd=ROOT, env={**clean, "PYTHONPATH": str(ROOT)}, text=True, capture_output=True,
        timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "partitions are frozen by the operator" in done.stderr, done.stderr
