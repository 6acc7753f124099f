"""Every pyiceberg / delta-rs read has a deadline: a hung catalog (a REST catalog that
accepts the connection and never answers) costs its own tables a timeout, not the others."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from partition_notify.writers.lakehouse.follower import Follower, head_of
from partition_notify.writers.lakehouse.iceberg import Catalogs, catalog_properties
from partition_notify.writers.lakehouse.schema import BEFORE_FIRST
from partition_notify.writers.lakehouse.store import LakehouseTables
from pyiceberg.catalog import load_catalog

from partition_notify.app import App
from partition_notify.core.errors import TableReadTimeout
from tests.faults.support import BlackHole
from tests.lakehouse.helpers import catalog_env, iceberg_table, logged, rows

TIMEOUT = 1.0


@pytest.fixture
def hole() -> Iterator[BlackHole]:
    h = BlackHole()
    yield h
    h.close()


@pytest.fixture
def env(tmp_path: Path, hole: BlackHole) -> dict[str, str]:
    (tmp_path / "wh").mkdir()
    return {**catalog_env("lake", f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh"),
            "PN_ICEBERG_CATALOG__STUCK__TYPE": "rest",
            "PN_ICEBERG_CATALOG__STUCK__URI": f"http://127.0.0.1:{hole.port}"}


def _readers(before: set[threading.Thread]) -> int:
    """Reader threads started since ``before`` that still run."""
    return sum(1 for t in threading.enumerate()
               if t not in before and t.name.startswith("pn-iceberg-read"))


def test_a_hung_catalog_times_out_alone_and_is_not_read_again_until_it_answers(
        app: App, env: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    tables = LakehouseTables(app.store)
    stuck = app.publisher.register_table("sales", "returns", ["datestamp_day", "region"])
    tables.register(stuck, "iceberg", catalog="stuck", start=BEFORE_FIRST)
    good = app.publisher.register_table("sales", "orders", ["datestamp_day", "region"])
    tables.register(good, "iceberg", catalog="lake", start=BEFORE_FIRST)
    table = iceberg_table(load_catalog("lake", **catalog_properties("lake", env)))
    table.append(rows(table, ("2026-01-01", "us", 1)))
    follower = Follower(app.publisher, "iceberg", catalogs=Catalogs(env), read_timeout=TIMEOUT)
    before = set(threading.enumerate())

    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        first = follower.run_once()
    took = time.monotonic() - started

    assert (first.timeouts, first.commits, first.errors) == (1, 1, 0), caplog.text
    assert took < TIMEOUT + 10  # the stuck table cost one deadline, not forever
    assert [m.spec for m in logged(app, "sales.orders")] == ["datestamp_day=2026-01-01/region=us"]
    assert any("sales.returns" in r.getMessage() and f"no answer in {TIMEOUT:g} s"
               in r.getMessage() for r in caplog.records), caplog.text
    assert _readers(before) == 1  # the stuck read's thread

    table.append(rows(table, ("2026-01-02", "us", 2)))
    second = follower.run_once()
    assert (second.stuck, second.timeouts, second.commits) == (1, 0, 1)
    assert _readers(before) == 1  # no second thread for the stuck table


def test_register_gives_up_on_a_hung_catalog_with_a_timeout(env: dict[str, str]) -> None:
    with pytest.raises(TableReadTimeout, match=r"sales\.returns: no answer in 1 s"):
        head_of("iceberg", catalog="stuck", identifier="sales.returns", location=None,
                keys=["ds"], catalogs=Catalogs(env), timeout=TIMEOUT)
