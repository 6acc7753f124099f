"""``serve --once`` exits 1 when a job failed, naming the jobs in one line: a cron
job or a container's health check reads the exit code, and every job catches its own
failure to keep a long-running ``serve`` going (it logs a WARNING and runs again).

Before: a store role with a writer's grants (docs/security.md), not the owner's
that ``serve`` needs, failed ten job runs with "permission denied", and ``serve
--once`` exited 0."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from partition_notify.app import build_app
from tests.security.test_writer_role import writer_url  # noqa: F401  (a fixture)


@pytest.fixture
def once_env(writer_url: tuple[str, str]) -> Iterator[dict[str, str]]:  # noqa: F811
    owner, url = writer_url
    with build_app(store_url=owner, transport_url="embedded://") as app:
        app.publisher.register_table("sales", "orders", ["ds"], retention_seconds=1)
        app.publisher.send_mark_set_done("sales", "orders", "ds=1")
    engine = create_engine(owner)
    with engine.begin() as conn:  # expired: there is work for the purges
        conn.execute(text("UPDATE pn_set_done SET expires_at = 1"))
    engine.dispose()
    yield {"PN_STORE_URL": url, "PN_TRANSPORT_URL": "embedded://"}


def _once(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "partition_notify.cli", "serve", "--once"],
                          env={"PATH": "/usr/bin:/bin", **env}, capture_output=True,
                          text=True, timeout=120)


def test_a_failed_job_makes_serve_once_exit_1_naming_it(once_env: dict[str, str]) -> None:
    done = _once(once_env)
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("partition-notify serve: ") and "housekeeping purge failed" in last, last
    assert "permission denied" in last and "Traceback" not in done.stderr, last


def test_serve_once_exits_0_when_every_job_ran(sqlite_url: str) -> None:
    build_app(store_url=sqlite_url, transport_url="embedded://").close()
    done = _once({"PN_STORE_URL": sqlite_url, "PN_TRANSPORT_URL": "embedded://"})
    assert done.returncode == 0, done.stderr[-2000:]
