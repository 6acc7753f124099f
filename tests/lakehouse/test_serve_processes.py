"""Followers in real ``serve`` processes sharing one store (SQLite, PostgreSQL).

* a ``serve`` that stops (SIGTERM) lets its tables' leases go: the other one
  announces the next commit at once, not when the lease would have lapsed;
* a ``serve`` killed (SIGKILL) between commits is taken over when its lease
  lapses: every commit announced, none twice.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from deltalake import write_deltalake
from partition_notify.writers.lakehouse.iceberg import catalog_properties
from partition_notify.writers.lakehouse.schema import BEFORE_FIRST
from partition_notify.writers.lakehouse.store import LakehouseTables
from pyiceberg.catalog import load_catalog

from partition_notify.app import App, build_app
from tests.lakehouse.helpers import catalog_env, delta_rows, iceberg_table, logged, rows
from tests.serve.helpers import ServeProcess
from tests.support.accounts import ROOT
from tests.support.net import wait_until

TABLE = "sales.orders"
#: Far longer than the waits below: a take-over inside them is the released lease.
DEFAULT_LEASE_SECONDS = 60.0
#: Waits for a serve process; far shorter than the default lease.
WAIT_SECONDS = 30.0


class Serves:
    """``serve`` processes on one store; any still running at the end is killed by its pid."""

    def __init__(self, tmp_path: Path, store_url: str) -> None:
        self.tmp_path, self.store_url = tmp_path, store_url
        self.started: list[ServeProcess] = []

    def spawn(self, **settings: str) -> ServeProcess:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PN_STORE_URL": self.store_url,
               "PN_TRANSPORT_URL": "embedded://", **settings}
        p = ServeProcess(self.tmp_path / f"serve{len(self.started)}.log", env)
        self.started.append(p)
        wait_until(lambda: "serving:" in p.text() or p.proc.poll() is not None, 60,
                   "serve to start")
        assert p.proc.poll() is None, p.text()[-2000:]
        return p

    def close(self) -> None:
        for p in self.started:
            if p.proc.poll() is None:
                p.proc.kill()
                p.proc.wait(30)


@pytest.fixture
def serves(tmp_path: Path, store_url: str) -> Iterator[Serves]:
    s = Serves(tmp_path, store_url)
    yield s
    s.close()


@pytest.fixture
def app(store_url: str) -> Iterator[App]:
    with build_app(store_url=store_url, transport_url="embedded://") as a:
        yield a


def _announced(app: App, n: int) -> None:
    wait_until(lambda: len(logged(app, TABLE)) >= n, WAIT_SECONDS, f"{n} message(s) logged")


def _says(p: ServeProcess, line: str) -> str:
    """``p``'s output once it holds ``line``: a follower logs a commit after the commit's
    messages are in the store, so a log read right after they appear may miss the line."""
    wait_until(lambda: line in p.text(), WAIT_SECONDS, f"{line!r} in the serve log")
    return p.text()


def test_a_stopped_serve_hands_its_iceberg_tables_over_at_once(
        app: App, serves: Serves, tmp_path: Path) -> None:
    (tmp_path / "wh").mkdir()
    env = catalog_env("lake", f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh")
    table = iceberg_table(load_catalog("lake", **catalog_properties("lake", env)))
    info = app.publisher.register_table("sales", "orders", ["datestamp_day", "region"])
    LakehouseTables(app.store).register(info, "iceberg", catalog="lake", start=BEFORE_FIRST)
    settings = {**env, "PN_ICEBERG_POLL_INTERVAL_SECONDS": "0.2"}
    first = serves.spawn(**settings)

    def commit(day: str) -> int:
        table.append(rows(table, (day, "us", 1)))
        return int(table.current_snapshot().snapshot_id)

    one = commit("2026-01-01")
    _announced(app, 1)
    second = serves.spawn(**settings)
    two = commit("2026-01-02")
    _announced(app, 2)
    _says(first, f"commit {two} ")  # the first holds the lease

    first.proc.send_signal(signal.SIGTERM)
    assert first.proc.wait(WAIT_SECONDS) == 0, first.text()[-2000:]
    assert "released the lease of 1 table(s)" in first.text()
    three = commit("2026-01-03")
    took = wait_until(lambda: len(logged(app, TABLE)) >= 3, WAIT_SECONDS, "the take-over")
    assert took < DEFAULT_LEASE_SECONDS
    text = _says(second, f"commit {three} ")
    assert f"commit {one} " not in text and f"commit {two} " not in text
    assert [(m.spec, m.revision) for m in logged(app, TABLE)] == [
        ("datestamp_day=2026-01-01/region=us", one),
        ("datestamp_day=2026-01-02/region=us", two),
        ("datestamp_day=2026-01-03/region=us", three)]


def test_a_killed_serve_is_taken_over_nothing_lost_nothing_twice(
        app: App, serves: Serves, tmp_path: Path) -> None:
    location = str(tmp_path / "orders")
    info = app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    LakehouseTables(app.store).register(info, "delta", location=location, start=BEFORE_FIRST)
    settings = {"PN_DELTA_POLL_INTERVAL_SECONDS": "0.2", "PN_LAKEHOUSE_LEASE_SECONDS": "2"}
    first = serves.spawn(**settings)

    def commit(day: str) -> None:
        write_deltalake(location, delta_rows((day, "us", 1)), mode="append",
                        partition_by=["datestamp", "region"])

    commit("20260101")  # version 0
    _announced(app, 1)
    second = serves.spawn(**settings)
    first.proc.send_signal(signal.SIGKILL)  # between commits, holding the lease
    assert first.proc.wait(WAIT_SECONDS) == -signal.SIGKILL
    commit("20260102")  # versions 1 and 2, while the lease lapses
    commit("20260103")
    _announced(app, 3)
    text = _says(second, "commit 2 ")
    assert "commit 1 " in text and "commit 2 " in text and "commit 0 " not in text
    assert [(m.spec, m.revision) for m in logged(app, TABLE)] == [
        ("datestamp=20260101/region=us", 0),
        ("datestamp=20260102/region=us", 1),
        ("datestamp=20260103/region=us", 2)]
    second.proc.send_signal(signal.SIGTERM)
    assert second.proc.wait(WAIT_SECONDS) == 0, second.text()[-2000:]
    assert len(logged(app, TABLE)) == 3  # and nothing more while it stopped
