"""A store the process may not read or write: one line naming the file and what
was expected, with a REAL permission-denied (the product runs as ``nobody``,
tests/support/unprivileged.py), and nothing lost.

Before: "store operation failed: OperationalError: attempt to write a readonly
database" / "unable to open database file" (the user had to guess which of the
file, its directory or the -wal/-shm files was refused), and a file that could be
opened but not written named no store at all.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import unprivileged

pytestmark = pytest.mark.usefixtures("_unprivileged")


@pytest.fixture
def _unprivileged() -> None:
    unprivileged.require_unprivileged()


@pytest.fixture
def store() -> Iterator[Path]:
    """A store with table db.t and one partition, made by root in a directory of root's."""
    with unprivileged.shared_dir() as d:
        db = d / "store.db"
        for args in (["register", "db.t", "--keys", "a"], ["announce", "db.t", "a=1"]):
            done = subprocess.run(
                [sys.executable, "-m", "partition_notify.cli", "--store-url", f"sqlite:///{db}",
                 *args], cwd=d, env=unprivileged.environment(), capture_output=True, text=True,
                timeout=120, check=False)
            assert done.returncode == 0, done.stderr
        yield db


def _events(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM pn_events").fetchone()[0])


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, (done.returncode, done.stderr)
    return lines[0]


def test_a_store_file_the_user_may_not_write_is_named(store: Path) -> None:
    # root's file (644) in a directory the user owns: opens, reads, but cannot be written.
    unprivileged.writable_by_user(store.parent)
    line = _one_line(unprivileged.cli("--store-url", f"sqlite:///{store}", "announce", "db.t",
                                      "a=2", cwd=store.parent))
    assert f"file {store} is not writable by this process (uid " in line, line
    assert _events(store) == 1


def test_a_read_only_store_and_directory_are_named(store: Path) -> None:
    line = _one_line(unprivileged.cli("--store-url", f"sqlite:///{store}", "announce", "db.t",
                                      "a=2", cwd=store.parent))
    assert f"file {store} is not writable by this process (uid " in line, line
    assert _events(store) == 1


def test_an_unreadable_store_is_named_by_read_commands(store: Path) -> None:
    store.chmod(0o600)
    line = _one_line(unprivileged.cli("--store-url", f"sqlite:///{store}", "tables",
                                      cwd=store.parent))
    assert f"file {store} is not readable by this process (uid " in line, line


def test_a_new_store_in_a_directory_the_user_may_not_write(store: Path) -> None:
    new = store.parent / "new.db"
    line = _one_line(unprivileged.cli("--store-url", f"sqlite:///{new}", "register", "db.x",
                                      "--keys", "a", cwd=store.parent))
    assert f"directory {store.parent} is not writable by this process (uid " in line, line
    assert not new.exists()


PUBLISH = """
import sys
from partition_notify import build_app, StoreError
try:
    with build_app(store_url=sys.argv[1], transport_url="embedded://") as app:
        app.publisher.announce_partitions("db", "t", ["a=2"])
except StoreError as exc:
    print(exc)
    sys.exit(3)
"""

SUBSCRIBE = """
import sys
from partition_notify import build_app, StoreError
try:
    with build_app(store_url=sys.argv[1], transport_url="embedded://") as app, \\
            app.subscriber() as sub:
        sub.wait_for_set_done("db", "t", "a=1", timeout=1)
except StoreError as exc:
    print(exc)
    sys.exit(3)
"""


@pytest.mark.parametrize("script", [PUBLISH, SUBSCRIBE], ids=["publisher", "subscriber"])
def test_the_python_api_raises_a_store_error_naming_the_file(store: Path, script: str) -> None:
    store.chmod(0o600)
    done = unprivileged.run(["-c", script, f"sqlite:///{store}"], cwd=store.parent)
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)
    assert f"file {store} is not readable by this process (uid " in done.stdout, done.stdout
    os.chmod(store, 0o644)
    assert _events(store) == 1
