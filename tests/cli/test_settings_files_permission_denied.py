"""Files that settings name, unreadable to the user the command runs as (a REAL
permission-denied: tests/support/unprivileged.py): one line naming the file,
exit 1, nothing saved.

Before (the Kafka CA bundle): ``announce`` saved the event and exited 5 with
"cannot connect a producer ... Unable to bootstrap", which sends the user to the
network instead of the file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import unprivileged


@pytest.fixture
def folder() -> Iterator[Path]:
    unprivileged.require_unprivileged()
    with unprivileged.shared_dir() as d:
        yield unprivileged.writable_by_user(d)


def test_an_unreadable_env_file_is_named(folder: Path) -> None:
    env = folder / ".env"
    env.write_text("PN_LOG_LEVEL=INFO\n")
    env.chmod(0o600)
    done = unprivileged.cli("--store-url", f"sqlite:///{folder}/s.db", "register", "db.t",
                            "--keys", "a", cwd=folder)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert f"settings file .env in {folder} cannot be read" in lines[0], lines
    assert "Permission denied" in lines[0], lines
    assert not (folder / "s.db").exists()


def test_an_unreadable_kafka_ca_bundle_is_named_before_anything_is_saved(folder: Path) -> None:
    ca = folder / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    ca.chmod(0o600)
    store = folder / "s.db"
    url = f"kafka://127.0.0.1:9092?security_protocol=SSL&ssl_cafile={ca}"
    done = unprivileged.cli("--store-url", f"sqlite:///{store}", "--transport-url", url,
                            "register", "db.t", "--keys", "a", cwd=folder)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert f"ssl_cafile='{ca}'" in lines[0] and "not readable" in lines[0], lines
    if store.exists():
        with sqlite3.connect(store) as conn:
            assert conn.execute("SELECT count(*) FROM pn_tables").fetchone()[0] == 0
