"""Iceberg tables in a real REST catalog (Lakana's server: tests/lakehouse/rest_server.py),
written by pyiceberg's ``RestCatalog`` and followed through the same REST API, configured
the way the README says (``PN_ICEBERG_CATALOG__<NAME>__*``, ``type=rest``).

The server is required in CI (``CI=true``: a missing one fails); on a laptop without
``scripts/bootstrap_rest.sh`` run these tests are skipped.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import pytest
from partition_notify.writers.lakehouse.follower import Follower
from partition_notify.writers.lakehouse.iceberg import Catalogs, catalog_properties
from partition_notify.writers.lakehouse.store import LakehouseTables
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.table import Table

from partition_notify.app import App
from partition_notify.cli import main
from tests.lakehouse.helpers import Logged, iceberg_table, logged, rows
from tests.lakehouse.rest_server import SERVER, RestCatalogServer, available
from tests.serve.helpers import ServeProcess
from tests.support.accounts import ROOT
from tests.support.ci import require
from tests.support.net import wait_until

TABLE = "sales.orders"
#: Lakana creates tables only under the top-level namespaces bronze, silver and gold.
IDENTIFIER = "bronze.orders"
KEYS = ["datestamp_day", "region"]
SET_DONE = "partition-notify.mark-set-done"
#: Waits for a serve process to announce (it polls every 0.2 s here).
WAIT_SECONDS = 60.0
_prefixes = count()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestCatalogServer]:
    require(available(), f"no Iceberg REST catalog server at {SERVER}: "
                         "run scripts/bootstrap_rest.sh")
    s = RestCatalogServer(tmp_path_factory.mktemp("rest-catalog")).start()
    yield s
    s.stop()


@pytest.fixture
def env(server: RestCatalogServer) -> dict[str, str]:
    """A REST catalog named ``rest`` on a prefix (Lakana environment) of this test's own."""
    return server.catalog_env("rest", server.environment(f"t{next(_prefixes)}"))


def _table(env: dict[str, str]) -> Table:
    catalog: Catalog = load_catalog("rest", **catalog_properties("rest", env))
    assert type(catalog).__name__ == "RestCatalog"
    return iceberg_table(catalog, IDENTIFIER)


def _commit(table: Table, day: str, region: str = "us", **props: str) -> int:
    table.append(rows(table, (day, region, 1)), snapshot_properties=props)
    return int(table.current_snapshot().snapshot_id)


def test_rest_commits_are_announced_once_in_order_across_a_restart(
        app: App, env: dict[str, str]) -> None:
    table = _table(env)
    info = app.publisher.register_table("sales", "orders", KEYS)
    LakehouseTables(app.store).register(info, "iceberg", catalog="rest", identifier=IDENTIFIER)
    follower = Follower(app.publisher, "iceberg", catalogs=Catalogs(env))
    assert follower.run_once().commits == 0  # first sight: no snapshot, follow from the first
    table.append(rows(table, ("2026-01-01", "us", 1), ("2026-01-01", "eu", 2)),
                 snapshot_properties={SET_DONE: "datestamp_day=2026-01-01"})
    one = int(table.current_snapshot().snapshot_id)
    two = _commit(table, "2026-01-02")

    stats = follower.run_once()
    assert (stats.commits, stats.errors, stats.timeouts) == (2, 0, 0)
    assert follower.run_once().commits == 0
    follower.release()  # a clean stop
    three = _commit(table, "2026-01-03")  # while no follower runs
    four = _commit(table, "2026-01-01")  # into an existing partition: nothing to announce

    restarted = Follower(app.publisher, "iceberg", catalogs=Catalogs(env))
    assert restarted.run_once().commits == 2
    assert restarted.run_once().commits == 0
    five = _commit(table, "2026-01-04")
    assert restarted.run_once().commits == 1
    assert logged(app, TABLE) == [
        Logged("add", "datestamp_day=2026-01-01/region=us", one),
        Logged("add", "datestamp_day=2026-01-01/region=eu", one),
        Logged("done", "datestamp_day=2026-01-01", one),
        Logged("add", "datestamp_day=2026-01-02/region=us", two),
        Logged("add", "datestamp_day=2026-01-03/region=us", three),
        Logged("add", "datestamp_day=2026-01-04/region=us", five)]
    assert four not in {m.revision for m in logged(app, TABLE)}


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_serve_processes_follow_a_rest_table_stopped_and_restarted(
        app: App, env: dict[str, str], store_url: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What an operator runs: ``register --catalog`` and ``serve``, configured by the
    environment alone; ``serve`` stopped (SIGTERM) between commits and started again."""
    table = _table(env)
    before = _commit(table, "2026-01-01")  # there before registration: never announced
    for name, value in env.items():  # register reads the catalog from the environment too
        monkeypatch.setenv(name, value)
    assert main(["--store-url", store_url, "register", TABLE, "--keys", ",".join(KEYS),
                 "--format", "iceberg", "--catalog", "rest", "--identifier", IDENTIFIER]) == 0
    settings = {**os.environ, "PYTHONPATH": str(ROOT), "PN_STORE_URL": store_url,
                "PN_TRANSPORT_URL": "embedded://", "PN_ICEBERG_POLL_INTERVAL_SECONDS": "0.2"}
    started: list[ServeProcess] = []

    def serve() -> ServeProcess:
        p = ServeProcess(tmp_path / f"serve{len(started)}.log", settings)
        started.append(p)
        return p

    def announced(n: int) -> None:
        wait_until(lambda: len(logged(app, TABLE)) >= n, WAIT_SECONDS, f"{n} message(s)")

    try:
        first = serve()
        one = _commit(table, "2026-01-02")
        announced(1)
        first.proc.send_signal(signal.SIGTERM)
        assert first.proc.wait(WAIT_SECONDS) == 0, first.text()[-2000:]
        two = _commit(table, "2026-01-03")  # while serve is down
        second = serve()
        three = _commit(table, "2026-01-04")
        announced(3)
        second.proc.send_signal(signal.SIGTERM)
        assert second.proc.wait(WAIT_SECONDS) == 0, second.text()[-2000:]
    finally:
        for p in started:
            if p.proc.poll() is None:
                p.proc.kill()
                p.proc.wait(30)
    assert f"commit {one} " in first.text() and f"commit {one} " not in second.text()
    assert [(m.kind, m.spec, m.revision) for m in logged(app, TABLE)] == [
        ("add", "datestamp_day=2026-01-02/region=us", one),
        ("add", "datestamp_day=2026-01-03/region=us", two),
        ("add", "datestamp_day=2026-01-04/region=us", three)]
    assert before not in {m.revision for m in logged(app, TABLE)}
