"""``register`` of an Iceberg table whose namespace or table name is spelled in another
case than its writer's, in a pyiceberg SQL catalog: the catalog compares them exactly, so
``Sales.Orders`` is not the writer's ``sales.orders``. Before: registered "from its first
commit" with only the warning that it has none; the follower then read "no table" for
ever and announced nothing. And a table name given in capitals (partition-notify keeps
names in lower case) had its head looked up under the capitals but the lower-case name
stored. Now refused in one line naming both spellings and the
``--identifier`` that reaches it, as a catalog name in another case is
(test_catalog_name_case.py); the follower says so at every run for a table created after
its registration. Real pyiceberg SQL catalogs on SQLite and PostgreSQL, the real CLI."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from partition_notify.writers.lakehouse.follower import Follower
from partition_notify.writers.lakehouse.iceberg import Catalogs, catalog_properties
from partition_notify.writers.lakehouse.store import LakehouseTables

from partition_notify.app import App
from tests.lakehouse.helpers import catalog_env, iceberg_table, rows
from tests.lakehouse.test_register_errors import cli
from tests.support.ci import require
from tests.support.postgres import PostgresDatabases


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
@pytest.mark.parametrize(("writer", "identifier"), [
    ("Sales.Orders", None), ("sales.orders", "SALES.orders"), ("sales.orders", "sales.Orders")])
def test_an_identifier_spelled_in_another_case_than_the_writers_is_refused_naming_both(
        tmp_path: Path, postgres: PostgresDatabases | None, database: str, writer: str,
        identifier: str | None) -> None:
    # No --identifier: the table's own name, which partition-notify keeps in lower case.
    code, out, err = _register_against(tmp_path, postgres, database, writer, "sales.orders",
                                       identifier)
    given = identifier or "sales.orders"
    # Before: exit 0, "has no commit yet (or does not exist: check the name)", after_commit=-1.
    assert code == 1, out + err[-2000:]
    assert err.startswith("partition-notify register: error: "), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"no table {given}," in err and f"--identifier {writer}" in err, err


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_table_name_given_in_capitals_reaches_the_writers_lower_case_table(
        tmp_path: Path, postgres: PostgresDatabases | None, database: str) -> None:
    # Before: its head was looked up as "Sales.Orders" (not found: "no commit yet",
    # after_commit=-1) while "sales.orders" was stored and then followed from its first
    # commit: every commit made before registration would have been announced.
    code, out, err = _register_against(tmp_path, postgres, database, "sales.orders",
                                       "Sales.Orders", None)
    assert (code, err) == (0, ""), err
    assert " identifier=sales.orders after_commit=-1" not in out, out
    assert " identifier=sales.orders after_commit=" in out, out


def _register_against(tmp_path: Path, postgres: PostgresDatabases | None, database: str,
                      writer: str, name: str, identifier: str | None) -> tuple[int, str, str]:
    """Register ``name`` (``--identifier``) when the writer created ``writer``, which has
    one commit; then, if that was refused, with the writer's spelling (must work)."""
    from pyiceberg.catalog import load_catalog

    if database == "postgresql":
        require(postgres is not None, "PostgreSQL is not reachable")
        assert postgres is not None
        uri = postgres.new()
    else:
        uri = f"sqlite:///{tmp_path}/catalog.db"
    try:
        (tmp_path / "wh").mkdir()
        env = catalog_env("lake", uri, tmp_path / "wh")
        table = iceberg_table(load_catalog("lake", **catalog_properties("lake", env)), writer)
        table.append(rows(table, ("2026-01-01", "us", 1)))
        head = table.current_snapshot()
        assert head is not None

        def register(*ident: str) -> tuple[int, str, str]:
            done = cli(tmp_path, "register", name, "--keys", "datestamp_day", "--format",
                       "iceberg", "--catalog", "lake", *ident, **env)
            return done.returncode, done.stdout, done.stderr

        first = register(*(["--identifier", identifier] if identifier else []))
        code, out, err = first if first[0] == 0 else register("--identifier", writer)
        assert code == 0, err
        assert f"identifier={writer} after_commit={head.snapshot_id}" in out, out
        return first
    finally:
        if postgres is not None and database == "postgresql":
            postgres.drop(uri)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_table_created_after_registration_under_another_case_is_said_at_every_run(
        app: App, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from pyiceberg.catalog import load_catalog

    (tmp_path / "wh").mkdir()
    env = catalog_env("lake", f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh")
    info = app.publisher.register_table("sales", "orders", ["datestamp_day", "region"])
    LakehouseTables(app.store).register(info, "iceberg", catalog="lake",
                                        identifier="Sales.Orders")
    follower = Follower(app.publisher, "iceberg", catalogs=Catalogs(env))
    follower.run_once()  # no table yet: from its first commit
    table = iceberg_table(load_catalog("lake", **catalog_properties("lake", env)))
    table.append(rows(table, ("2026-01-01", "us", 1)))

    with caplog.at_level(logging.WARNING):
        first = follower.run_once()
        second = follower.run_once()

    assert (first.errors, second.errors, first.commits) == (1, 1, 0), (first, second)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 2 and all("Sales.Orders" in m and "--identifier sales.orders" in m
                                  for m in said), said
