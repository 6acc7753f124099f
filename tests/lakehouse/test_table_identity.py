"""A followed table deleted and created again at the same place is another table, even once
its new log has passed the old cursor: the follower keeps the table's identity (Delta
``metaData.id``, Iceberg ``table-uuid``; migration 0015) with its cursor, reports the gap
(COMMITS_MISSED) and follows the new table from its first commit. Real delta-rs and
pyiceberg tables; store: SQLite and PostgreSQL."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.table import TableFeatures
from partition_notify.writers.lakehouse.follower import Follower
from partition_notify.writers.lakehouse.iceberg import Catalogs, catalog_properties
from partition_notify.writers.lakehouse.store import LakehouseTables
from pyiceberg.catalog import load_catalog

from partition_notify.app import App, build_app
from tests.lakehouse.delta_v2 import uuid_named_checkpoint
from tests.lakehouse.helpers import Logged, catalog_env, delta_rows, iceberg_table, logged, rows
from tests.support.migrations import downgraded

TABLE = "sales.orders"
KEYS = ["datestamp", "region"]


def write(location: Path, day: str) -> int:
    write_deltalake(str(location), delta_rows((day, "us", 1)), mode="append", partition_by=KEYS)
    return DeltaTable(str(location)).version()


def follow_delta(app: App, location: Path) -> Follower:
    info = app.publisher.register_table("sales", "orders", KEYS)
    LakehouseTables(app.store).register(info, "delta", location=str(location))
    return Follower(app.publisher, "delta")


def recreate(location: Path, days: list[str]) -> None:
    """A full refresh: the directory deleted, a new table written with more versions than
    the old one had when it was last read."""
    shutil.rmtree(location)
    for day in days:
        write(location, day)


def added(app: App) -> list[str]:
    return [m.spec for m in logged(app, TABLE) if m.kind == "add"]


NEW_DAYS = ["20260201", "20260202", "20260203", "20260204", "20260205"]


def test_a_delta_table_created_again_past_the_cursor_is_a_gap_then_followed_from_its_start(
    app: App, tmp_path: Path
) -> None:
    location = tmp_path / "orders"
    follower = follow_delta(app, location)
    follower.run_once()  # before the table exists: from version 0
    for day in ("20260101", "20260102", "20260103"):
        write(location, day)
    assert follower.run_once().commits == 3  # versions 0..2
    recreate(location, NEW_DAYS)  # versions 0..4: past the cursor (2)

    stats = follower.run_once()
    follower.run_once()

    # Before: no gap; versions 3 and 4 of the new table were announced as the old one's
    # next commits, and its versions 0..2 never were.
    assert stats.gaps == 1, stats
    assert logged(app, TABLE)[3] == Logged("missed", "2", None)
    assert added(app)[3:] == [f"datestamp={d}/region=us" for d in NEW_DAYS]
    write(location, "20260206")
    follower.run_once()
    assert logged(app, TABLE)[-1] == Logged("add", "datestamp=20260206/region=us", 5)


@pytest.mark.parametrize("v2", [None, "classic-name", "uuid-json", "uuid-parquet"],
                         ids=["classic", "v2-checkpoint", "v2-uuid-json", "v2-uuid-parquet"])
def test_a_delta_table_created_again_inside_a_cleaned_gap_is_one_gap(
    app: App, tmp_path: Path, v2: str | None
) -> None:
    """The old table's versions past the cursor and the new table's first ones are gone
    (checkpointed, their JSON cleaned): one COMMITS_MISSED, then the new table's commits.
    v2: the new table has the v2Checkpoint feature and policy (delta-rs writes its V2
    checkpoint under the classic name; the id is read from its metaData column).
    uuid-*: that checkpoint under a UUID name, its adds in a sidecar, its top-level file
    JSON or parquet: crafted per the Delta protocol, which delta-rs cannot write
    (tests/lakehouse/delta_v2.py); delta-rs reads it."""
    location = tmp_path / "orders"
    follower = follow_delta(app, location)
    follower.run_once()
    for day in ("20260101", "20260102", "20260103"):
        write(location, day)
    assert follower.run_once().commits == 3  # cursor: version 2 of the old table
    recreate(location, NEW_DAYS)  # versions 0..4 of the new table
    if v2:  # versions 5, 6 (a metaData action: cleaned below the checkpoint), 7
        DeltaTable(str(location)).alter.add_feature(
            [TableFeatures.V2Checkpoint], allow_protocol_versions_increase=True)
        DeltaTable(str(location)).alter.set_table_properties({"delta.checkpointPolicy": "v2"})
        write(location, "20260205")  # 7: the checkpoint's, no metaData in its JSON
    table = DeltaTable(str(location))
    table.create_checkpoint()
    at = table.version()
    if v2 is not None and v2.startswith("uuid-"):
        uuid_named_checkpoint(location, at, v2.removeprefix("uuid-"))
    for version in range(at):  # log cleanup: the JSON below the checkpoint
        (location / "_delta_log" / f"{version:020d}.json").unlink()
    v5 = write(location, "20260206")

    assert follower.run_once().gaps == 1  # 3..at-1 cleaned: resumes at v5
    v6 = write(location, "20260207")
    stats = follower.run_once()

    # Before: the id at 5 was not recorded with the gap; the next read saw the new
    # table's id against the old one's and sent a second COMMITS_MISSED.
    assert (stats.gaps, stats.commits) == (0, 1), stats
    assert logged(app, TABLE)[3:] == [
        Logged("missed", "2", v5),
        Logged("add", "datestamp=20260207/region=us", v6),
    ]
    info = app.publisher.table("sales", "orders")
    f = LakehouseTables(app.store).get(info.id)
    assert f is not None and f.table_uuid == DeltaTable(str(location)).metadata().id


def test_a_delta_log_ending_before_the_cursor_records_the_new_table(
    app: App, tmp_path: Path
) -> None:
    """Deleted and created again with fewer versions than the cursor: one gap, which
    records the new table's id (read from its log, bounded), then its commits."""
    location = tmp_path / "orders"
    follower = follow_delta(app, location)
    follower.run_once()
    for day in ("20260101", "20260102", "20260103", "20260104"):
        write(location, day)
    assert follower.run_once().commits == 4  # cursor: version 3
    recreate(location, NEW_DAYS[:2])  # versions 0..1

    assert follower.run_once().gaps == 1
    v2 = write(location, "20260206")
    stats = follower.run_once()

    assert (stats.gaps, stats.commits) == (0, 1), stats
    assert logged(app, TABLE)[4:] == [
        Logged("missed", "3", 1),
        Logged("add", "datestamp=20260206/region=us", v2),
    ]
    f = LakehouseTables(app.store).get(app.publisher.table("sales", "orders").id)
    assert f is not None and f.table_uuid == DeltaTable(str(location)).metadata().id


def test_a_table_followed_before_the_identity_was_kept_gets_it_at_its_next_read(
    store_url: str, tmp_path: Path
) -> None:
    """A store upgraded from migration 0014: the row has a cursor but no identity; the
    follower's next read records it, and a recreation after that is detected."""
    location = tmp_path / "orders"
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        follower = follow_delta(app, location)
        follower.run_once()
        write(location, "20260101")
        follower.run_once()  # version 0 announced
        follower.release()
    with downgraded(store_url, "0014"):  # the identity is not known in 0014
        pass  # and the upgrade again: 0014 -> 0015
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        info = app.publisher.table("sales", "orders")
        before = LakehouseTables(app.store).get(info.id)
        assert before is not None and (before.cursor, before.table_uuid) == (0, None)
        follower = Follower(app.publisher, "delta")
        assert follower.run_once().commits == 0
        after = LakehouseTables(app.store).get(info.id)
        assert after is not None and after.table_uuid == DeltaTable(str(location)).metadata().id
        recreate(location, NEW_DAYS[:3])
        assert follower.run_once().gaps == 1
        follower.run_once()
        assert added(app) == ["datestamp=20260101/region=us"] + [
            f"datestamp={d}/region=us" for d in NEW_DAYS[:3]
        ]


def test_an_iceberg_table_dropped_and_created_again_is_followed_from_its_first_snapshot(
    app: App, tmp_path: Path
) -> None:
    (tmp_path / "wh").mkdir()
    env = catalog_env("lake", f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh")
    catalog = load_catalog("lake", **catalog_properties("lake", env))
    table = iceberg_table(catalog)
    table.append(rows(table, ("2026-01-01", "us", 1)))
    info = app.publisher.register_table("sales", "orders", ["datestamp_day", "region"])
    LakehouseTables(app.store).register(info, "iceberg", catalog="lake")
    follower = Follower(app.publisher, "iceberg", catalogs=Catalogs(env))
    follower.run_once()  # after the first snapshot
    table.append(rows(table, ("2026-01-02", "us", 2)))
    follower.run_once()
    catalog.drop_table("sales.orders")
    table = iceberg_table(catalog)
    table.append(rows(table, ("2026-02-01", "us", 1)))
    table.append(rows(table, ("2026-02-02", "us", 2)))

    stats = follower.run_once()
    follower.run_once()

    # Before: a gap resuming at the new table's current snapshot; its first one (2026-02-01)
    # was never announced.
    assert stats.gaps == 1, stats
    assert [m.kind for m in logged(app, TABLE)] == ["add", "missed", "add", "add"]
    assert added(app) == [
        "datestamp_day=2026-01-02/region=us",
        "datestamp_day=2026-02-01/region=us",
        "datestamp_day=2026-02-02/region=us",
    ]
