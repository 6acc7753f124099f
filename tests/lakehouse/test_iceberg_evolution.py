"""Partition evolution: each data file is announced per the spec it was written with,
expressed in the registered keys (writers/lakehouse/specs.py)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from partition_notify.writers.lakehouse.follower import Follower
from partition_notify.writers.lakehouse.iceberg import Catalogs, catalog_properties
from partition_notify.writers.lakehouse.store import LakehouseTables
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.transforms import BucketTransform, HourTransform

from partition_notify.app import App
from tests.lakehouse.helpers import Logged, catalog_env, iceberg_table, logged, rows

TABLE = "sales.orders"
KEYS = ["datestamp_day", "region"]


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    (tmp_path / "wh").mkdir()
    env = catalog_env("lake", f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh")
    return load_catalog("lake", **catalog_properties("lake", env))


@pytest.fixture
def follower(app: App, tmp_path: Path, catalog: Catalog) -> Iterator[Follower]:
    env = catalog_env("lake", f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh")
    info = app.publisher.register_table("sales", "orders", KEYS)
    LakehouseTables(app.store).register(info, "iceberg", catalog="lake")
    yield Follower(app.publisher, "iceberg", catalogs=Catalogs(env))


def _timestamp_table(catalog: Catalog) -> Any:
    """day(ts) as datestamp_day and identity(region), ts a timestamp."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform, IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType, TimestampType

    catalog.create_namespace_if_not_exists("sales")
    schema = Schema(NestedField(1, "ts", TimestampType(), required=False),
                    NestedField(2, "region", StringType(), required=False),
                    NestedField(3, "v", LongType(), required=False))
    spec = PartitionSpec(PartitionField(1, 1000, DayTransform(), "datestamp_day"),
                         PartitionField(2, 1001, IdentityTransform(), "region"))
    return catalog.create_table(TABLE, schema, partition_spec=spec)


def _ts_rows(table: Any, *data: tuple[str, str, int]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"ts": dt.datetime.fromisoformat(t), "region": r, "v": v} for t, r, v in data],
        schema=table.schema().as_arrow())


def test_a_field_added_by_evolution_is_left_out_and_said_once(
        app: App, catalog: Catalog, follower: Follower,
        caplog: pytest.LogCaptureFixture) -> None:
    table = iceberg_table(catalog)
    follower.run_once()
    table.append(rows(table, ("2026-01-01", "us", 1)))
    with table.update_spec() as update:
        update.add_field("v", BucketTransform(4), "v_bucket")
    table.append(rows(table, ("2026-01-02", "us", 2), ("2026-01-01", "us", 3)))
    evolved = table.current_snapshot().snapshot_id
    table.append(rows(table, ("2026-01-03", "us", 4)))

    with caplog.at_level(logging.WARNING):
        stats = follower.run_once()

    assert (stats.commits, stats.errors) == (3, 0), caplog.text
    specs = [m.spec for m in logged(app, TABLE)]
    # 2026-01-01/us held data (spec 0): the spec-1 file into it announces nothing.
    assert specs == ["datestamp_day=2026-01-01/region=us", "datestamp_day=2026-01-02/region=us",
                     "datestamp_day=2026-01-03/region=us"]
    assert logged(app, TABLE)[1].revision == evolved
    said = [r for r in caplog.records if "v_bucket" in r.getMessage()]
    assert len(said) == 1 and "registered keys" in said[0].getMessage()


def test_day_evolved_to_hour_is_announced_as_its_day(
        app: App, catalog: Catalog, follower: Follower) -> None:
    table = _timestamp_table(catalog)
    follower.run_once()
    table.append(_ts_rows(table, ("2026-01-01T10:00:00", "us", 1)))
    with table.update_spec() as update:
        update.remove_field("datestamp_day")
        update.add_field("ts", HourTransform(), "ts_hour")
    table.append(_ts_rows(table, ("2026-01-01T11:00:00", "us", 2),  # day existed
                          ("2026-01-02T23:00:00", "us", 3)))
    hourly = table.current_snapshot().snapshot_id

    stats = follower.run_once()

    assert (stats.commits, stats.errors) == (2, 0)
    assert logged(app, TABLE)[1:] == [
        Logged("add", "datestamp_day=2026-01-02/region=us", hourly)]


def test_a_registered_key_the_new_spec_cannot_give_stops_at_that_commit_loudly(
        app: App, catalog: Catalog, follower: Follower,
        caplog: pytest.LogCaptureFixture) -> None:
    table = iceberg_table(catalog)
    follower.run_once()
    table.append(rows(table, ("2026-01-01", "us", 1)))
    with table.update_spec() as update:
        update.remove_field("region")
    table.append(rows(table, ("2026-01-02", "us", 2)))

    with caplog.at_level(logging.WARNING):
        stats = follower.run_once()
        again = follower.run_once()

    # The commit before the evolution is announced; the one after is not skipped:
    # the follower stays before it and says why, every run, until an operator acts.
    assert (stats.commits, stats.errors, again.commits, again.errors) == (1, 1, 0, 1)
    assert [m.spec for m in logged(app, TABLE)] == ["datestamp_day=2026-01-01/region=us"]
    assert "'region'" in caplog.text and "register the new layout" in caplog.text
