"""Many followed tables: idle ones cost a cheap change check, not a table read, and a
catalog's tables share its connection pool (real pyiceberg, delta-rs, PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from deltalake import DeltaTable, write_deltalake
from partition_notify.writers.lakehouse.follower import Follower
from partition_notify.writers.lakehouse.iceberg import Catalogs, catalog_properties
from partition_notify.writers.lakehouse.store import LakehouseTables
from pyiceberg.catalog import load_catalog

from partition_notify.app import App
from tests.lakehouse.helpers import Logged, catalog_env, delta_rows, iceberg_table, logged, rows
from tests.support.ci import require
from tests.support.postgres import PostgresDatabases

ICEBERG_KEYS = ["datestamp_day", "region"]
DELTA_KEYS = ["datestamp", "region"]


def _iceberg_tables(app: App, env: dict[str, str], catalog: str, n: int) -> list[Any]:
    cat = load_catalog(catalog, **catalog_properties(catalog, env))
    out = []
    for i in range(n):
        info = app.publisher.register_table("lake", f"t{i}", ICEBERG_KEYS)
        LakehouseTables(app.store).register(info, "iceberg", catalog=catalog,
                                            identifier=f"lake.t{i}")
        table = iceberg_table(cat, f"lake.t{i}")
        table.append(rows(table, ("2026-01-01", "us", i)))
        out.append(table)
    return out


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_idle_iceberg_tables_are_not_read_and_a_commit_is_read_at_the_next_poll(
        app: App, tmp_path: Path) -> None:
    (tmp_path / "wh").mkdir()
    env = catalog_env("lake", f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh")
    tables = _iceberg_tables(app, env, "lake", 30)
    follower = Follower(app.publisher, "iceberg", catalogs=Catalogs(env))
    follower.run_once()  # cursors start at each table's current commit
    follower.run_once()  # every table read once with the catalog's answer in hand

    idle = follower.run_once()
    tables[7].append(rows(tables[7], ("2026-01-02", "us", 1)))
    busy = follower.run_once()

    assert (idle.tables, idle.unchanged, idle.commits) == (30, 30, 0)
    assert (busy.unchanged, busy.commits, busy.errors) == (29, 1, 0)
    head = tables[7].current_snapshot().snapshot_id
    assert logged(app, "lake.t7") == [Logged("add", "datestamp_day=2026-01-02/region=us", head)]


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_idle_delta_tables_cost_a_stat_and_a_cleaned_log_behind_a_checkpoint_is_a_gap(
        app: App, tmp_path: Path) -> None:
    paths = [str(tmp_path / f"t{i}") for i in range(20)]
    for i, path in enumerate(paths):
        write_deltalake(path, delta_rows(("20260101", "us", i)), partition_by=DELTA_KEYS)
        info = app.publisher.register_table("lake", f"t{i}", DELTA_KEYS)
        LakehouseTables(app.store).register(info, "delta", location=path)
    follower = Follower(app.publisher, "delta")
    follower.run_once()
    follower.run_once()
    assert follower.run_once().unchanged == 20

    # Versions 1 and 2 land, a checkpoint, and log cleanup removes version 1 before
    # the follower looks: the next version's file is gone, _last_checkpoint is new.
    for v in (2, 3):
        write_deltalake(paths[3], delta_rows((f"2026010{v}", "us", v)), mode="append",
                        partition_by=DELTA_KEYS)
    DeltaTable(paths[3]).create_checkpoint()
    (Path(paths[3]) / "_delta_log" / f"{1:020d}.json").unlink()
    stats = follower.run_once()

    assert (stats.unchanged, stats.gaps) == (19, 1)
    assert logged(app, "lake.t3") == [Logged("missed", "0", 2)]


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_hundred_tables_of_a_postgresql_catalog_share_its_few_connections(
        app: App, tmp_path: Path, postgres: PostgresDatabases | None) -> None:
    require(postgres is not None, "PostgreSQL is not reachable")
    assert postgres is not None
    url = postgres.new()
    probe = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        (tmp_path / "wh").mkdir()
        env = catalog_env("pg", url, tmp_path / "wh")
        tables = _iceberg_tables(app, env, "pg", 100)
        follower = Follower(app.publisher, "iceberg", catalogs=Catalogs(env))
        for _ in range(3):
            follower.run_once()
        tables[50].append(rows(tables[50], ("2026-01-02", "us", 1)))
        assert follower.run_once().commits == 1

        with probe.connect() as conn:  # the follower's catalog connections, not this one
            open_ = conn.execute(sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()")).scalar_one()
        # The test's own writer catalog holds one; the follower's pool the rest.
        assert open_ <= 1 + 5, open_
    finally:
        probe.dispose()
        postgres.drop(url)


@pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)
def test_one_iceberg_table_registered_twice_is_followed_by_both(
        app: App, tmp_path: Path) -> None:
    """Two registrations of one catalog table (other keys or topics, or a first try
    with the wrong keys left in place): the cheap change check answers for each of
    them. It kept one table id per identifier, so the other got "not in the catalog"
    for ever and never read a commit after its first catch-up."""
    (tmp_path / "wh").mkdir()
    env = catalog_env("lake", f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh")
    cat = load_catalog("lake", **catalog_properties("lake", env))
    table = iceberg_table(cat, "lake.orders")
    table.append(rows(table, ("2026-01-01", "us", 1)))
    for name in ("orders_a", "orders_b"):
        info = app.publisher.register_table("lake", name, ICEBERG_KEYS)
        LakehouseTables(app.store).register(info, "iceberg", catalog="lake",
                                            identifier="lake.orders")
    follower = Follower(app.publisher, "iceberg", catalogs=Catalogs(env))
    follower.run_once()  # cursors start at the table's current commit
    follower.run_once()  # both caught up, with the catalog's answer in hand

    table.append(rows(table, ("2026-01-02", "us", 2)))
    follower.run_once()

    head = table.current_snapshot().snapshot_id
    expected = [Logged("add", "datestamp_day=2026-01-02/region=us", head)]
    assert logged(app, "lake.orders_a") == expected
    assert logged(app, "lake.orders_b") == expected
