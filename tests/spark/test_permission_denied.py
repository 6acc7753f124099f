"""Spark writes to a location the user may not write, with a REAL permission-denied:
the writer runs as ``nobody`` (tests/support/unprivileged.py) with its own local
Spark. Each write fails with our error (one line naming the location and what was
expected), and nothing is announced, left running or half-written.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import unprivileged

pytestmark = pytest.mark.spark


def _count(store: Path, sql: str) -> int:
    with sqlite3.connect(store) as conn:
        return int(conn.execute(sql).fetchone()[0])


def test_writes_to_a_location_the_user_may_not_write_are_refused_in_one_line() -> None:
    unprivileged.require_unprivileged()
    with unprivileged.shared_dir() as d:
        work = d / "work"
        work.mkdir()
        unprivileged.writable_by_user(work)
        locked = d / "locked"  # root's, 755: the user may read, not write
        locked.mkdir()
        store = work / "store.db"
        made = subprocess.run(
            [sys.executable, "-m", "partition_notify.cli", "--store-url", f"sqlite:///{store}",
             "register", "sales.orders", "--keys", "datestamp,region"], cwd=d,
            env=unprivileged.environment(), capture_output=True, text=True, timeout=120,
            check=False)
        assert made.returncode == 0, made.stderr
        for f in work.iterdir():
            unprivileged.writable_by_user(f)
        done = unprivileged.run(
            [str(Path(__file__).with_name("_unprivileged_writes.py")), f"sqlite:///{store}",
             str(locked / "orders"), str(locked / "customers"), str(work / "scratch")],
            cwd=work, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        outcomes = {o["write"]: o for o in map(json.loads, done.stdout.strip().splitlines())}
        for name, location in (("writer", locked / "orders"), ("dataset", locked / "customers")):
            message = outcomes[name]["message"]
            assert outcomes[name]["error"] is not None, outcomes
            assert "\n" not in message and "\tat " not in message, message
            assert str(location) in message and "cannot be written" in message, message
            assert "expected a directory" in message, message
            assert not location.exists()
        assert _count(store, "SELECT count(*) FROM pn_events") == 0
        assert _count(store, "SELECT count(*) FROM pn_revision_txns "
                             "WHERE state = 'running'") == 0
