"""``serve`` on a store it may read but not write, run as a user the kernel refuses
(tests/support/unprivileged.py): one line naming the file and why, exit 1.

Before: serve started, answered /readyz 200 ("ready") and then failed every job
(relay, purges, lease release) with warnings and every HTTP write with a 503.
"""

from __future__ import annotations

import subprocess
import sys

from tests.support import unprivileged


def test_serve_refuses_a_store_it_may_not_write() -> None:
    unprivileged.require_unprivileged()
    with unprivileged.shared_dir() as d:
        url = f"sqlite:///{d}/store.db"
        made = subprocess.run(
            [sys.executable, "-m", "partition_notify.cli", "--store-url", url, "register",
             "db.t", "--keys", "a"], cwd=d, env=unprivileged.environment(),
            capture_output=True, text=True, timeout=120, check=False)
        assert made.returncode == 0, made.stderr
        # The directory is the user's (SQLite may add its -wal and -shm), the file root's.
        unprivileged.writable_by_user(d)
        done = unprivileged.run(["-m", "partition_notify.cli", "serve"], cwd=d, env={
            "PN_STORE_URL": url, "PN_TRANSPORT_URL": "embedded://",
            "PN_HTTP_BIND": "127.0.0.1:0"}, timeout=60)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
        assert lines[-1].startswith("partition-notify serve: error: "), lines
        assert f"file {d}/store.db is not writable by this process (uid " in lines[-1], lines
        assert "Traceback" not in done.stderr, done.stderr


def test_serve_refuses_a_read_only_store_url() -> None:
    # Before: serve started on ?mode=ro and failed every write it made.
    with unprivileged.shared_dir() as d:
        made = subprocess.run(
            [sys.executable, "-m", "partition_notify.cli", "--store-url",
             f"sqlite:///{d}/store.db", "register", "db.t", "--keys", "a"], cwd=d,
            env=unprivileged.environment(), capture_output=True, text=True, timeout=120,
            check=False)
        assert made.returncode == 0, made.stderr
        try:
            done = subprocess.run(
                [sys.executable, "-m", "partition_notify.cli", "serve"], cwd=d,
                env=unprivileged.environment({
                    "PN_STORE_URL": f"sqlite:///file:{d}/store.db?mode=ro&uri=true",
                    "PN_TRANSPORT_URL": "embedded://", "PN_HTTP_BIND": "127.0.0.1:0"}),
                capture_output=True, text=True, timeout=60, check=False)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError("serve started on a read-only store URL") from exc
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
        assert lines[-1].startswith("partition-notify serve: error: "), lines
        assert "opens it read-only" in lines[-1], lines
