"""A followed table dropped from its catalog (Iceberg) or deleted from its location
(Delta) and not created again: the follower stops at its cursor and says why, at every
run, on /ui/ops and in ``pn_lakehouse_stopped`` (README: a table that cannot be loaded at
its cursor), instead of reading nothing for ever. Created again, it goes on by itself: a
gap, then the new table's commits. Real pyiceberg SQL catalog and delta-rs tables."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from deltalake import write_deltalake
from partition_notify.writers.lakehouse.follower import Follower
from partition_notify.writers.lakehouse.iceberg import Catalogs, catalog_properties
from partition_notify.writers.lakehouse.store import LakehouseTables
from pyiceberg.catalog import load_catalog

from partition_notify.app import App
from tests.lakehouse.helpers import catalog_env, delta_rows, iceberg_table, logged, rows

TABLE = "sales.orders"


@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
def test_a_dropped_table_stops_its_follower_until_it_is_created_again(
        app: App, tmp_path: Path, fmt: str, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "wh").mkdir()
    env = catalog_env("lake", f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh")
    catalog = load_catalog("lake", **catalog_properties("lake", env))
    location = tmp_path / "orders"
    if fmt == "iceberg":
        keys = ["datestamp_day", "region"]

        def write(day: str) -> None:
            table.append(rows(table, (f"{day[:4]}-{day[4:6]}-{day[6:]}", "us", 1)))

        def drop() -> None:
            catalog.drop_table(TABLE)

        def create() -> None:
            nonlocal table
            table = iceberg_table(catalog)
        table = iceberg_table(catalog)
    else:
        keys = ["datestamp", "region"]

        def write(day: str) -> None:
            write_deltalake(str(location), delta_rows((day, "us", 1)), mode="append",
                            partition_by=keys)

        def drop() -> None:
            shutil.rmtree(location)

        def create() -> None:
            pass  # the next write creates it
    write("20260101")
    info = app.publisher.register_table("sales", "orders", keys)
    LakehouseTables(app.store).register(info, fmt, catalog="lake" if fmt == "iceberg"
                                        else None, location=None if fmt == "iceberg"
                                        else str(location))
    follower = Follower(app.publisher, fmt, catalogs=Catalogs(env))
    follower.run_once()  # after its first commit
    write("20260102")
    assert follower.run_once().commits == 1
    drop()

    with caplog.at_level(logging.WARNING):
        stats = follower.run_once()
        again = follower.run_once()

    # Before: stopped=0, errors=0 and no warning: read as "no commit yet" for ever.
    assert (stats.stopped, again.stopped, again.errors) == (1, 1, 1), (stats, again)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and all("no longer exists" in w for w in warnings), warnings
    f = LakehouseTables(app.store).get(info.id)
    assert f is not None and f.stopped_at is not None

    create()
    write("20260201")
    gap = follower.run_once()
    write("20260202")
    after = follower.run_once()

    # Iceberg: the new table from its first snapshot; Delta: a log behind the cursor is
    # resumed at its newest version (README), its version 0 inside the gap.
    new = ["2026-02-01", "2026-02-02"] if fmt == "iceberg" else ["20260202"]
    assert (gap.gaps, gap.stopped, after.commits, after.stopped) == (1, 0, len(new), 0), (
        gap, after)
    assert [m.kind for m in logged(app, TABLE)] == ["add", "missed", *["add"] * len(new)]
    assert [m.spec.split("/")[0].split("=")[1] for m in logged(app, TABLE)[2:]] == new
