"""Iceberg tables written by pyiceberg on a SQL catalog, followed commit by commit.

The store is parametrised (SQLite, PostgreSQL: tests/conftest.py's ``app``); the
catalog is SQLite here and PostgreSQL in the last test.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from partition_notify.writers.lakehouse.follower import Follower
from partition_notify.writers.lakehouse.iceberg import Catalogs, catalog_properties
from partition_notify.writers.lakehouse.store import LakehouseTables
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.expressions import EqualTo

from partition_notify.app import App
from tests.lakehouse.helpers import (
    Logged,
    catalog_env,
    iceberg_table,
    logged,
    rewrite,
    rows,
)
from tests.support.ci import require
from tests.support.postgres import PostgresDatabases

TABLE = "sales.orders"
KEYS = ["datestamp_day", "region"]
SET_DONE = "partition-notify.mark-set-done"


def _catalog(env: dict[str, str]) -> Catalog:
    return load_catalog("lake", **catalog_properties("lake", env))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "wh").mkdir()
    return catalog_env("lake", f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh")


@pytest.fixture
def follower(app: App, env: dict[str, str]) -> Iterator[Follower]:
    info = app.publisher.register_table("sales", "orders", KEYS)
    LakehouseTables(app.store).register(info, "iceberg", catalog="lake")
    yield Follower(app.publisher, "iceberg", catalogs=Catalogs(env))


def add(spec: str, revision: int | None) -> Logged:
    return Logged("add", spec, revision)


def test_appends_announce_new_partitions_once_then_the_commits_set_done(
        app: App, env: dict[str, str], follower: Follower) -> None:
    assert follower.run_once().commits == 0  # registered before the table exists
    table = iceberg_table(_catalog(env))
    table.append(rows(table, ("2026-01-01", "us", 1), ("2026-01-01", "eu", 2)),
                 snapshot_properties={SET_DONE: "datestamp_day=2026-01-01"})
    first = table.current_snapshot().snapshot_id
    table.append(rows(table, ("2026-01-01", "us", 3), ("2026-01-02", "us", 4)))
    second = table.current_snapshot().snapshot_id

    stats = follower.run_once()

    assert stats.commits == 2 and stats.gaps == 0 and stats.errors == 0
    assert logged(app, TABLE) == [
        add("datestamp_day=2026-01-01/region=us", first),
        add("datestamp_day=2026-01-01/region=eu", first),
        Logged("done", "datestamp_day=2026-01-01", first),
        add("datestamp_day=2026-01-02/region=us", second),  # 01/us existed: not again
    ]
    assert follower.run_once().commits == 0  # nothing new: nothing logged again
    assert len(logged(app, TABLE)) == 4


def test_overwrite_reannounces_delete_and_rewrite_announce_nothing(
        app: App, env: dict[str, str], follower: Follower) -> None:
    table = iceberg_table(_catalog(env))
    follower.run_once()
    table.append(rows(table, ("2026-01-01", "us", 1), ("2026-01-01", "eu", 2),
                      ("2026-01-02", "us", 3)))
    follower.run_once()
    mark = app.store.log.max_event_id()

    # pyiceberg's overwrite commits a delete snapshot, then an append snapshot.
    table.overwrite(rows(table, ("2026-01-02", "us", 5)), overwrite_filter=EqualTo("v", 3),
                    snapshot_properties={SET_DONE: "datestamp_day=2026-01-02"})
    overwrite = table.current_snapshot().snapshot_id
    table.delete(EqualTo("region", "eu"))  # delete only
    rewrite(table)  # compaction: operation replace
    assert table.current_snapshot().summary.operation.value == "replace"

    stats = follower.run_once()

    assert stats.commits == 4 and stats.errors == 0
    assert logged(app, TABLE, after=mark) == [
        add("datestamp_day=2026-01-02/region=us", overwrite),
        Logged("done", "datestamp_day=2026-01-02", overwrite),  # once, after the append
    ]


def test_an_expired_snapshot_is_a_gap_never_skipped_silently(
        app: App, env: dict[str, str], follower: Follower,
        caplog: pytest.LogCaptureFixture) -> None:
    table = iceberg_table(_catalog(env))
    table.append(rows(table, ("2026-01-01", "us", 1)))
    follower.run_once()  # starts after the first commit
    cursor = table.current_snapshot().snapshot_id
    table.append(rows(table, ("2026-01-02", "us", 2)))
    expired = table.current_snapshot().snapshot_id
    table.append(rows(table, ("2026-01-03", "us", 3)))
    table.maintenance.expire_snapshots().by_id(expired).commit()
    table.append(rows(table, ("2026-01-04", "us", 4)))  # after the gap: announced later

    with caplog.at_level(logging.WARNING):
        stats = follower.run_once()

    assert (stats.gaps, stats.commits) == (1, 0), caplog.text
    assert any("GAP" in r.getMessage() and str(cursor) in r.getMessage()
               for r in caplog.records), caplog.text
    info = app.publisher.table("sales", "orders")
    assert LakehouseTables(app.store).gaps(info.id) == 1
    head = table.current_snapshot().snapshot_id
    # Subscribers learn of it in the table's topic: what was handled last, where it goes on.
    assert logged(app, TABLE) == [Logged("missed", str(cursor), head)]
    table.append(rows(table, ("2026-01-05", "us", 5)))
    follower.run_once()
    assert [m.spec for m in logged(app, TABLE)] == [
        str(cursor), "datestamp_day=2026-01-05/region=us"]


@pytest.mark.parametrize("expiry", ["by-id", "older-than"])
def test_the_handled_snapshot_expired_after_new_commits_is_no_gap(
        app: App, env: dict[str, str], follower: Follower, expiry: str) -> None:
    """The snapshot handled last is expired after the next one was committed, before the
    follower reads it: by id, or by a daily expiry of all snapshots older than now run
    right after the day's write. pyiceberg's expiry drops the parent link of its child,
    but no commit was lost: the child's sequence number follows the handled one's and it
    holds that one's manifest. (Expiring the second too is a gap: the test above.)"""
    table = iceberg_table(_catalog(env))
    table.append(rows(table, ("2026-01-01", "us", 1)))
    follower.run_once()  # starts after the first commit
    cursor = table.current_snapshot().snapshot_id
    table.append(rows(table, ("2026-01-02", "us", 2)))
    second = table.current_snapshot().snapshot_id
    if expiry == "older-than":  # all but the current one
        table.maintenance.expire_snapshots().older_than(datetime.now(UTC)).commit()
    table.append(rows(table, ("2026-01-03", "us", 3)))
    third = table.current_snapshot().snapshot_id
    if expiry == "by-id":
        table.maintenance.expire_snapshots().by_id(cursor).commit()

    stats = follower.run_once()

    # Before: gaps=1, COMMITS_MISSED after the cursor resuming at the current snapshot:
    # 2026-01-02 and 2026-01-03 were never announced though their commits were there.
    assert (stats.gaps, stats.commits) == (0, 2), stats
    assert logged(app, TABLE) == [add("datestamp_day=2026-01-02/region=us", second),
                                  add("datestamp_day=2026-01-03/region=us", third)]


def test_a_second_serve_waits_for_the_lease_and_a_restart_resumes_without_duplicates(
        app: App, env: dict[str, str], follower: Follower) -> None:
    table = iceberg_table(_catalog(env))
    follower.run_once()
    other = Follower(app.publisher, "iceberg", catalogs=Catalogs(env))
    table.append(rows(table, ("2026-01-01", "us", 1)))

    assert other.run_once().leased_elsewhere == 1
    follower.run_once()
    table.append(rows(table, ("2026-01-02", "us", 2)))
    assert other.run_once().commits == 0
    follower.release()  # a clean stop: the next process takes over at once

    restarted = Follower(app.publisher, "iceberg", catalogs=Catalogs(env))
    assert restarted.run_once().commits == 1
    assert restarted.run_once().commits == 0
    assert [m.spec for m in logged(app, TABLE)] == [
        "datestamp_day=2026-01-01/region=us", "datestamp_day=2026-01-02/region=us"]


def test_a_dead_followers_lease_lapses_and_its_late_commit_is_refused(
        app: App, env: dict[str, str]) -> None:
    info = app.publisher.register_table("sales", "orders", KEYS)
    LakehouseTables(app.store).register(info, "iceberg", catalog="lake")
    # A lease of 0 s lapses at once: this follower is "killed" after each run.
    dead = Follower(app.publisher, "iceberg", catalogs=Catalogs(env), lease_seconds=0.0)
    table = iceberg_table(_catalog(env))
    dead.run_once()
    table.append(rows(table, ("2026-01-01", "us", 1)))
    live = Follower(app.publisher, "iceberg", catalogs=Catalogs(env))

    assert live.run_once().commits == 1
    assert dead.run_once().leased_elsewhere == 1  # the live one holds it now
    assert [m.spec for m in logged(app, TABLE)] == ["datestamp_day=2026-01-01/region=us"]


def test_a_table_with_data_is_followed_from_its_current_commit(
        app: App, env: dict[str, str], follower: Follower) -> None:
    table = iceberg_table(_catalog(env))
    table.append(rows(table, ("2026-01-01", "us", 1)))
    follower.run_once()  # first sight: its partitions exist already
    table.append(rows(table, ("2026-01-01", "us", 2), ("2026-01-02", "us", 3)))
    follower.run_once()
    assert [m.spec for m in logged(app, TABLE)] == ["datestamp_day=2026-01-02/region=us"]


def test_a_bad_set_done_property_is_logged_and_the_partitions_still_announced(
        app: App, env: dict[str, str], follower: Follower,
        caplog: pytest.LogCaptureFixture) -> None:
    table = iceberg_table(_catalog(env))
    follower.run_once()
    table.append(rows(table, ("2026-01-01", "us", 1)), snapshot_properties={SET_DONE: "ds=1"})
    with caplog.at_level(logging.ERROR):
        follower.run_once()
    assert [m.kind for m in logged(app, TABLE)] == ["add"]
    assert any("'ds=1'" in r.getMessage() and "ds" in r.getMessage() for r in caplog.records)


def test_catalog_properties_use_pyicebergs_spelling() -> None:
    env = {"PN_ICEBERG_CATALOG__LAKE__S3__ACCESS_KEY_ID": "k",
           "PN_ICEBERG_CATALOG__LAKE__URI": "sqlite://", "PN_ICEBERG_CATALOG__OTHER__URI": "x"}
    assert catalog_properties("lake", env) == {"s3.access-key-id": "k", "uri": "sqlite://"}


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_postgresql_catalog(app: App, tmp_path: Path,
                              postgres: PostgresDatabases | None) -> None:
    require(postgres is not None, "PostgreSQL is not reachable")
    assert postgres is not None
    url = postgres.new()
    try:
        (tmp_path / "wh").mkdir()
        env = catalog_env("pg", url, tmp_path / "wh")
        info = app.publisher.register_table("sales", "orders", KEYS)
        LakehouseTables(app.store).register(info, "iceberg", catalog="pg")
        follower = Follower(app.publisher, "iceberg", catalogs=Catalogs(env))
        table = iceberg_table(load_catalog("pg", **catalog_properties("pg", env)))
        follower.run_once()
        table.append(rows(table, ("2026-01-01", "us", 1)),
                      snapshot_properties={SET_DONE: "datestamp_day=2026-01-01"})
        follower.run_once()
        assert [m.kind for m in logged(app, TABLE)] == ["add", "done"]
    finally:
        postgres.drop(url)
