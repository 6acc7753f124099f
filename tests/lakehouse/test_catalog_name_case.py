"""``register --catalog NAME`` reads ``PN_ICEBERG_CATALOG__<NAME>__*`` whatever NAME's case
(environment variables are spelled in capitals), but pyiceberg's SQL catalog keeps each
table under the catalog name its writer used and compares it exactly: a table written
through catalog "lake" is not in catalog "LAKE" of the same database. Real pyiceberg SQL
catalogs on SQLite and PostgreSQL, the real CLI."""

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
@pytest.mark.parametrize(("writer", "given"), [("lake", "LAKE"), ("LAKE", "lake")])
def test_a_catalog_name_spelled_in_another_case_than_the_writers_is_refused_naming_both(
        tmp_path: Path, postgres: PostgresDatabases | None, database: str, writer: str,
        given: str) -> None:
    from pyiceberg.catalog import load_catalog

    if database == "postgresql":
        require(postgres is not None, "PostgreSQL is not reachable")
        assert postgres is not None
        uri = postgres.new()
    else:
        uri = f"sqlite:///{tmp_path}/catalog.db"
    try:
        (tmp_path / "wh").mkdir()
        props = {"type": "sql", "uri": uri, "warehouse": (tmp_path / "wh").as_uri()}
        table = iceberg_table(load_catalog(writer, **props))
        table.append(rows(table, ("2026-01-01", "us", 1)))
        head = table.current_snapshot()
        assert head is not None
        env = {f"PN_ICEBERG_CATALOG__LAKE__{k.upper()}": v for k, v in props.items()}

        def register(catalog: str) -> tuple[int, str, str]:
            done = cli(tmp_path, "register", "sales.orders", "--keys", "datestamp_day",
                       "--format", "iceberg", "--catalog", catalog, **env)
            return done.returncode, done.stdout, done.stderr

        code, out, err = register(given)
        # Before: exit 0, followed "from its first commit" with only the warning that it
        # has none: the follower then read an empty catalog for ever and announced nothing.
        assert code == 1, out + err[-2000:]
        assert err.startswith("partition-notify register: error: "), err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert f"catalog {given!r}" in err and f"--catalog {writer}" in err, err
        code, out, err = register(writer)
        assert code == 0, err
        assert f"catalog={writer} " in out and f"after_commit={head.snapshot_id}" in out, out
    finally:
        if postgres is not None and database == "postgresql":
            postgres.drop(uri)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_table_created_after_registration_under_another_spelling_is_said_at_every_run(
        app: App, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Registered before the writer created the table (register can only warn "no commit
    yet"), then created through catalog "lake" while registered as "LAKE": the follower
    says so at every run, naming both spellings, instead of reading nothing for ever."""
    from pyiceberg.catalog import load_catalog

    (tmp_path / "wh").mkdir()
    env = catalog_env("lake", f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh")
    info = app.publisher.register_table("sales", "orders", ["datestamp_day", "region"])
    LakehouseTables(app.store).register(info, "iceberg", catalog="LAKE")
    follower = Follower(app.publisher, "iceberg", catalogs=Catalogs(env))
    follower.run_once()  # no table yet: from its first commit
    table = iceberg_table(load_catalog("lake", **catalog_properties("lake", env)))
    table.append(rows(table, ("2026-01-01", "us", 1)))

    with caplog.at_level(logging.WARNING):
        first = follower.run_once()
        second = follower.run_once()

    # Before: errors=0 and no warning, at every run.
    assert (first.errors, second.errors, first.commits) == (1, 1, 0), (first, second)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 2 and all("'LAKE'" in m and "--catalog lake" in m for m in said), said
