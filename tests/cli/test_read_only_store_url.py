"""A read-only store URL (``sqlite:///file:PATH?mode=ro&uri=true``) used by a user
who may only READ the store file and its directory (an on-call account, a
dashboard host): read commands work, nothing is written, and what cannot work
says so in one line. REAL permission-denied: the product runs as ``nobody``
(tests/support/unprivileged.py).

Before: every read command failed with "store operation failed: OperationalError:
attempt to write a readonly database" (opening the store set WAL mode and ran
the migrations), and such URLs skipped the file diagnosis.
"""

from __future__ import annotations

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


def _root_cli(db: Path, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "partition_notify.cli", "--store-url", f"sqlite:///{db}",
         *args], cwd=db.parent, env=unprivileged.environment(), capture_output=True, text=True,
        timeout=120, check=False)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def store() -> Iterator[Path]:
    """Root's store (644) in root's directory (755): table db.t, a=1 announced and done."""
    with unprivileged.shared_dir() as d:
        db = d / "store.db"
        _root_cli(db, "register", "db.t", "--keys", "a")
        _root_cli(db, "announce", "db.t", "a=1")
        _root_cli(db, "mark-done", "db.t", "a=1")
        yield db


@pytest.fixture
def writer(store: Path) -> Iterator[sqlite3.Connection]:
    """A writer holding the store open, as serve does: it keeps -wal and -shm (644)."""
    conn = sqlite3.connect(store, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("SELECT count(*) FROM pn_events").fetchone()
    assert store.with_name("store.db-shm").exists()
    yield conn
    conn.close()


def _ro(db: Path) -> str:
    return f"sqlite:///file:{db}?mode=ro&uri=true"


def _snapshot(db: Path) -> tuple[bytes, list[str]]:
    return db.read_bytes(), sorted(p.name for p in db.parent.iterdir())


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, (done.returncode, done.stderr)
    return lines[0]


@pytest.mark.parametrize("args", [["tables"], ["history", "db.t"],
                                  ["wait", "db.t", "a=1", "--timeout", "5"],
                                  ["tail", "db.t", "--history", "--count", "1",
                                   "--timeout", "5"]],
                         ids=["tables", "history", "wait", "tail"])
def test_read_commands_work_on_a_store_the_user_may_only_read(
        store: Path, writer: sqlite3.Connection, args: list[str]) -> None:
    before = _snapshot(store)
    done = unprivileged.cli("--store-url", _ro(store), *args, cwd=store.parent)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert ("db.t" in done.stdout) or ('"a=1"' in done.stdout), done.stdout
    assert _snapshot(store) == before


SUBSCRIBE = """
import sys
from partition_notify import build_app
with build_app(store_url=sys.argv[1], transport_url="embedded://") as app, \\
        app.subscriber() as sub:
    print(len(sub.set_done_history("db", "t")))
"""


def test_the_embedded_subscriber_reads_history_on_a_read_only_store(
        store: Path, writer: sqlite3.Connection) -> None:
    done = unprivileged.run(["-c", SUBSCRIBE, _ro(store)], cwd=store.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1", done.stdout


def test_a_write_command_on_a_read_only_store_url_names_it(
        store: Path, writer: sqlite3.Connection) -> None:
    line = _one_line(unprivileged.cli("--store-url", _ro(store), "announce", "db.t", "a=2",
                                      cwd=store.parent))
    assert f"store file {store} is opened read-only" in line, line
    assert "announce" not in line or "writes" in line, line


def test_without_a_writer_the_missing_shm_is_named(store: Path) -> None:
    # Nothing holds the store open: SQLite removed -wal and -shm, and a WAL reader
    # must create the -shm in a directory this user may not write.
    assert not store.with_name("store.db-shm").exists()
    line = _one_line(unprivileged.cli("--store-url", _ro(store), "tables", cwd=store.parent))
    assert f"{store}-shm" in line and f"directory {store.parent}" in line, line
    assert "immutable=1" in line, line


def test_immutable_reads_a_store_nothing_writes(store: Path) -> None:
    done = unprivileged.cli("--store-url", f"sqlite:///file:{store}?immutable=1&uri=true",
                            "tables", cwd=store.parent)
    assert done.returncode == 0, done.stderr
    assert "db.t" in done.stdout


def test_an_old_schema_is_refused_not_migrated(store: Path, writer: sqlite3.Connection) -> None:
    writer.execute("UPDATE alembic_version SET version_num = '0001'")
    before = _snapshot(store)
    line = _one_line(unprivileged.cli("--store-url", _ro(store), "tables", cwd=store.parent))
    assert "schema" in line and "0001" in line and "read-only" in line, line
    assert _snapshot(store) == before


def test_an_unreadable_store_is_named_with_a_read_only_url(store: Path) -> None:
    store.chmod(0o600)
    line = _one_line(unprivileged.cli("--store-url", _ro(store), "tables", cwd=store.parent))
    assert f"file {store} is not readable by this process (uid " in line, line


def test_a_store_in_rollback_journal_mode_is_read_without_setting_wal(store: Path) -> None:
    # A copy taken out of WAL mode (e.g. by `sqlite3 .backup`): opening it must not
    # switch it back, which writes the file.
    with sqlite3.connect(store, isolation_level=None) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    before = _snapshot(store)
    done = unprivileged.cli("--store-url", _ro(store), "tables", cwd=store.parent)
    assert done.returncode == 0, done.stderr
    assert "db.t" in done.stdout
    assert _snapshot(store) == before
