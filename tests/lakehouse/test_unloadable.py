"""A followed table whose state at the cursor cannot be loaded (a Delta log version or
checkpoint that is corrupt, an Iceberg metadata file the catalog names that is gone):
the follower records the stop with its reason (``pn_lakehouse_stopped``), loses nothing
while it waits, goes on by itself once the table is repaired, and an operator can skip
to the commit the follower would resume at (Delta), audited like a commit's skip. Real
delta-rs and pyiceberg tables, files corrupted on disk; store: SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable, write_deltalake
from partition_notify.writers.commit_refusals import CommitRefusals
from partition_notify.writers.lakehouse.follower import Follower
from partition_notify.writers.lakehouse.iceberg import Catalogs, catalog_properties
from partition_notify.writers.lakehouse.store import Followed, LakehouseTables
from pyiceberg.catalog import load_catalog
from pyiceberg.table import Table

from partition_notify.app import App
from tests.lakehouse.helpers import Logged, catalog_env, delta_rows, iceberg_table, logged, rows
from tests.lakehouse.test_skip_commit import cli

TABLE = "sales.orders"
KEYS = ["datestamp", "region"]


def write(location: Path, day: str) -> int:
    write_deltalake(str(location), delta_rows((day, "us", 1)), mode="append", partition_by=KEYS)
    return DeltaTable(str(location)).version()


def version_file(location: Path, version: int) -> Path:
    return location / "_delta_log" / f"{version:020d}.json"


def followed(app: App) -> Followed:
    f = LakehouseTables(app.store).get(app.publisher.table("sales", "orders").id)
    assert f is not None
    return f


def delta_follower(app: App, location: Path) -> Follower:
    info = app.publisher.register_table("sales", "orders", KEYS)
    LakehouseTables(app.store).register(info, "delta", location=str(location))
    follower = Follower(app.publisher, "delta")
    follower.run_once()  # before the table exists: from version 0
    return follower


def test_a_delta_version_that_cannot_be_loaded_stops_the_table_until_it_is_repaired(
    app: App, tmp_path: Path
) -> None:
    location = tmp_path / "orders"
    follower = delta_follower(app, location)
    write(location, "20260101")
    assert follower.run_once().commits == 1  # cursor: version 0
    v1 = write(location, "20260102")
    good = version_file(location, 0).read_bytes()
    version_file(location, 0).write_text("not json\n")  # a torn copy, a bad restore

    for _ in range(2):
        stats = follower.run_once()
        # Before: a gap; version 1, readable, was reported missed instead of waited for.
        assert (stats.gaps, stats.commits, stats.stopped) == (0, 0, 1), stats
    stop = followed(app)
    assert (stop.cursor, stop.stopped_at) == (0, v1)
    assert stop.stopped_reason is not None and "version 0 cannot be loaded" in stop.stopped_reason
    assert logged(app, TABLE) == [Logged("add", "datestamp=20260101/region=us", 0)]

    version_file(location, 0).write_bytes(good)  # repaired
    stats = follower.run_once()

    assert (stats.gaps, stats.commits, stats.stopped) == (0, 1, 0), stats
    assert followed(app).stopped_at is None
    assert logged(app, TABLE)[1:] == [Logged("add", "datestamp=20260102/region=us", v1)]


def test_a_corrupt_delta_checkpoint_stops_the_table_until_it_is_removed(
    app: App, tmp_path: Path
) -> None:
    location = tmp_path / "orders"
    follower = delta_follower(app, location)
    for day in ("20260101", "20260102", "20260103"):
        write(location, day)
    assert follower.run_once().commits == 3  # cursor: version 2
    DeltaTable(str(location)).create_checkpoint()  # at 2
    v3 = write(location, "20260104")
    checkpoint = location / "_delta_log" / f"{2:020d}.checkpoint.parquet"
    checkpoint.write_bytes(b"not parquet")

    stats = follower.run_once()

    assert (stats.gaps, stats.commits, stats.stopped) == (0, 0, 1), stats
    assert followed(app).stopped_at == v3
    checkpoint.unlink()  # the repair: the JSON versions are all there
    (location / "_delta_log" / "_last_checkpoint").unlink()
    stats = follower.run_once()
    assert (stats.gaps, stats.commits, stats.stopped) == (0, 1, 0), stats
    assert logged(app, TABLE)[-1] == Logged("add", "datestamp=20260104/region=us", v3)


def test_a_delta_table_stopped_on_its_state_can_be_skipped_to_where_it_resumes(
    app: App, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = tmp_path / "orders"
    follower = delta_follower(app, location)
    write(location, "20260101")
    write(location, "20260102")
    assert follower.run_once().commits == 2  # cursor: version 1
    write(location, "20260103")
    v3 = write(location, "20260104")
    DeltaTable(str(location)).create_checkpoint()  # at 3: later versions load without 1
    version_file(location, 1).write_text("{")
    assert follower.run_once().stopped == 1
    assert followed(app).stopped_at == v3

    code, out, err = cli(capsys, store_url, "lakehouse", "skip", TABLE, "--version", str(v3))

    assert (code, err) == (0, ""), err
    # Before: "skipped delta commit 3", though the COMMITS_MISSED covers 2 and 3.
    assert out.startswith(f"skipped delta commits 2..{v3} of {TABLE} (after commit 1)"), out
    v4 = write(location, "20260105")
    stats = follower.run_once()
    assert (stats.commits, stats.stopped, stats.gaps) == (1, 0, 0), stats
    assert logged(app, TABLE)[2:] == [
        Logged("missed", "1", v3),
        Logged("add", "datestamp=20260105/region=us", v4),
    ]
    (audit,) = CommitRefusals(app.store).latest(10)
    assert audit.status == "skipped" and "version 1 cannot be loaded" in audit.reason
    assert audit.reason.startswith(f"delta commits 2..{v3} skipped by cli:"), audit.reason


def iceberg_follower(app: App, tmp_path: Path) -> tuple[Follower, object]:
    (tmp_path / "wh").mkdir()
    env = catalog_env("lake", f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh")
    catalog = load_catalog("lake", **catalog_properties("lake", env))
    table = iceberg_table(catalog)
    info = app.publisher.register_table("sales", "orders", ["datestamp_day", "region"])
    LakehouseTables(app.store).register(info, "iceberg", catalog="lake")
    follower = Follower(app.publisher, "iceberg", catalogs=Catalogs(env))
    follower.run_once()  # from its first snapshot
    return follower, table


def test_an_iceberg_table_whose_metadata_file_is_gone_is_stopped_until_it_is_back(
    app: App, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pyiceberg.table import Table

    follower, table = iceberg_follower(app, tmp_path)
    assert isinstance(table, Table)
    table.append(rows(table, ("2026-01-01", "us", 1)))
    assert follower.run_once().commits == 1
    first = followed(app).cursor
    table.append(rows(table, ("2026-01-02", "us", 2)))
    metadata = Path(table.metadata_location.removeprefix("file://"))
    kept = metadata.read_bytes()
    metadata.unlink()  # the catalog names a file that is no longer there

    for _ in range(2):
        stats = follower.run_once()
        # Before: an error logged at every run, no stop recorded, nothing counted.
        assert (stats.commits, stats.stopped) == (0, 1), stats
    stop = followed(app)
    assert stop.stopped_at == first and stop.cursor == first
    assert stop.stopped_reason is not None and "cannot be loaded" in stop.stopped_reason
    # Nothing to skip to: no snapshot of it can be read. The way on is the repair.
    code, out, err = cli(capsys, store_url, "lakehouse", "skip", TABLE, "--version", str(first))
    assert (code, out) == (1, ""), out
    assert err.count("\n") == 1 and "cannot be loaded" in err and "repair" in err, err
    assert CommitRefusals(app.store).latest(10) == []

    metadata.write_bytes(kept)
    stats = follower.run_once()

    assert (stats.commits, stats.stopped) == (1, 0), stats
    assert followed(app).stopped_at is None
    assert logged(app, TABLE)[-1].spec == "datestamp_day=2026-01-02/region=us"


def snapshots_after_one(app: App, tmp_path: Path) -> tuple[Follower, Table, int, int, int]:
    """An Iceberg table followed after its first snapshot, two more written: the
    follower's cursor, the second snapshot and the third."""
    follower, table = iceberg_follower(app, tmp_path)
    assert isinstance(table, Table)
    table.append(rows(table, ("2026-01-01", "us", 1)))
    assert follower.run_once().commits == 1
    first = followed(app).cursor
    assert first is not None
    table.append(rows(table, ("2026-01-02", "us", 2)))
    second = table.current_snapshot()
    table.append(rows(table, ("2026-01-03", "us", 3)))
    third = table.current_snapshot()
    assert second is not None and third is not None
    return follower, table, first, second.snapshot_id, third.snapshot_id


def test_an_iceberg_snapshot_whose_manifest_is_gone_stops_the_table_until_it_is_back(
    app: App, tmp_path: Path
) -> None:
    follower, table, first, second, _ = snapshots_after_one(app, tmp_path)
    snap = table.snapshot_by_id(second)
    assert snap is not None
    (mine,) = [m for m in snap.manifests(table.io) if m.added_snapshot_id == second]
    manifest = Path(mine.manifest_path.removeprefix("file://"))
    kept = manifest.read_bytes()
    manifest.unlink()

    for _ in range(2):
        stats = follower.run_once()
        # Before: an error logged at every run, no stop recorded, nothing counted.
        assert (stats.commits, stats.stopped, stats.gaps) == (0, 1, 0), stats
    stop = followed(app)
    assert (stop.cursor, stop.stopped_at) == (first, second)
    assert stop.stopped_reason is not None and f"snapshot {second}" in stop.stopped_reason
    assert "manifest" in stop.stopped_reason

    manifest.write_bytes(kept)
    stats = follower.run_once()

    assert (stats.commits, stats.stopped, stats.gaps) == (2, 0, 0), stats
    assert followed(app).stopped_at is None
    assert [e.spec for e in logged(app, TABLE)[-2:]] == [
        "datestamp_day=2026-01-02/region=us", "datestamp_day=2026-01-03/region=us"]


def test_an_iceberg_snapshot_whose_manifest_list_is_corrupt_can_be_skipped(
    app: App, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    follower, table, first, second, third = snapshots_after_one(app, tmp_path)
    snap = table.snapshot_by_id(second)
    assert snap is not None
    Path(snap.manifest_list.removeprefix("file://")).write_bytes(b"not avro")

    stats = follower.run_once()

    assert (stats.commits, stats.stopped, stats.gaps) == (0, 1, 0), stats
    assert (followed(app).cursor, followed(app).stopped_at) == (first, second)
    code, out, err = cli(capsys, store_url, "lakehouse", "skip", TABLE, "--version", str(second))
    assert (code, err) == (0, ""), err
    assert f"iceberg commit {second} " in out, out
    stats = follower.run_once()
    assert (stats.commits, stats.stopped, stats.gaps) == (1, 0, 0), stats
    assert logged(app, TABLE)[-2:] == [
        Logged("missed", str(first), second),
        Logged("add", "datestamp_day=2026-01-03/region=us", third),
    ]
    (audit,) = CommitRefusals(app.store).latest(10)
    assert audit.status == "skipped" and "manifest list" in audit.reason
