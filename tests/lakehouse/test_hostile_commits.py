"""Commits the follower must not trust blindly: whoever can write a table's Delta log or
commit to its Iceberg catalog can put anything there (a bug in a writer, or on purpose).
Real tables (pyiceberg on a SQL catalog, delta-rs), a few hand-written entries.

What the follower must never do with them: hang or grow without bound (a read that
never returns holds its table forever and spins a core), announce what is not a
partition, or send a set-done twice because a compaction carried the property along.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake
from partition_notify.writers.lakehouse.follower import Follower
from partition_notify.writers.lakehouse.iceberg import Catalogs, catalog_properties
from partition_notify.writers.lakehouse.store import LakehouseTables
from pyiceberg.catalog import load_catalog
from pyiceberg.table import Table

from partition_notify.app import App
from tests.lakehouse.helpers import (
    Logged,
    catalog_env,
    delta_rows,
    iceberg_table,
    logged,
    rewrite,
    rows,
)

TABLE = "sales.orders"
SET_DONE = "partition-notify.mark-set-done"
#: Short: a read that does not return within it is what these tests catch.
READ_TIMEOUT = 5.0


def delta_follower(app: App, location: Path) -> Follower:
    info = app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    LakehouseTables(app.store).register(info, "delta", location=str(location))
    return Follower(app.publisher, "delta", read_timeout=READ_TIMEOUT)


def write(location: Path, *data: tuple[str, str, int], done: str | None = None) -> int:
    write_deltalake(str(location), delta_rows(*data), mode="append",
                    partition_by=["datestamp", "region"],
                    commit_properties=CommitProperties(custom_metadata={SET_DONE: done})
                    if done else None)
    return DeltaTable(str(location)).version()


def log_entry(location: Path, version: int, *actions: object) -> None:
    """A hand-written log version, as any process with write access to the log can add."""
    text = "".join(json.dumps(a) + "\n" for a in actions)
    (location / "_delta_log" / f"{version:020d}.json").write_text(text)


def test_a_log_file_beyond_any_delta_version_is_no_commit(
        app: App, tmp_path: Path) -> None:
    location = tmp_path / "orders"
    follower = delta_follower(app, location)
    follower.run_once()
    v0 = write(location, ("20260101", "us", 1))
    # 20 digits, more than a Delta version (a long) holds: before, the follower counted
    # every version up to it as cleaned, one by one, and never came back.
    log_entry(location, 10**20 - 1, {"commitInfo": {"operation": "WRITE"}})
    v1 = write(location, ("20260102", "us", 2))

    stats = follower.run_once()

    assert (stats.timeouts, stats.errors, stats.gaps) == (0, 0, 0), stats
    assert logged(app, TABLE) == [Logged("add", "datestamp=20260101/region=us", v0),
                                  Logged("add", "datestamp=20260102/region=us", v1)]


def test_a_gap_of_a_trillion_versions_is_reported_at_once(
        app: App, tmp_path: Path) -> None:
    location = tmp_path / "orders"
    follower = delta_follower(app, location)
    follower.run_once()
    write(location, ("20260101", "us", 1))
    follower.run_once()
    far = 10**12
    log_entry(location, far, {"commitInfo": {"operation": "WRITE"}})

    started = time.monotonic()
    stats = follower.run_once()

    assert time.monotonic() - started < READ_TIMEOUT
    assert (stats.timeouts, stats.gaps) == (0, 1), stats
    assert logged(app, TABLE)[-1] == Logged("missed", "0", far)


def test_a_log_ending_a_trillion_versions_before_the_cursor_is_reported_at_once(
        app: App, tmp_path: Path) -> None:
    """The log now ends before the cursor (read as a table created again): its id is
    read from at most MAX_ID_FILES files, not by delta-rs loading the newest version
    (which walks every number up to it from the checkpoint)."""
    location = tmp_path / "orders"
    follower = delta_follower(app, location)
    follower.run_once()
    write(location, ("20260101", "us", 1))
    follower.run_once()
    far = 10**12
    log_entry(location, far + 5, {"commitInfo": {"operation": "WRITE"}})
    assert follower.run_once().gaps == 1  # cursor: far + 5
    (location / "_delta_log" / f"{far + 5:020d}.json").unlink()
    log_entry(location, far, {"commitInfo": {"operation": "WRITE"}})

    started = time.monotonic()
    stats = follower.run_once()

    # Before: the read timed out (delta-rs loading version 10**12), at every run.
    assert time.monotonic() - started < READ_TIMEOUT
    assert (stats.timeouts, stats.gaps) == (0, 1), stats
    assert logged(app, TABLE)[-1] == Logged("missed", str(far + 5), far)


@pytest.mark.parametrize("values", [
    {"datestamp": "20260102", "region": ["us"]},
    {"datestamp": 20260102, "region": "us"},
    {"datestamp": "20260102", "region": {"us": 1}},
])
def test_partition_values_that_are_not_strings_are_not_announced(
        app: App, tmp_path: Path, values: dict[str, object],
        caplog: pytest.LogCaptureFixture) -> None:
    location = tmp_path / "orders"
    follower = delta_follower(app, location)
    write(location, ("20260101", "us", 1))
    follower.run_once()
    log_entry(location, 1, {"commitInfo": {"operation": "WRITE"}},
              {"add": {"path": "p.parquet", "partitionValues": values, "size": 1,
                       "modificationTime": 1, "dataChange": True}})

    with caplog.at_level(logging.WARNING):
        stats = follower.run_once()

    # Delta's partitionValues are strings (or null): anything else is not a commit we
    # can read, and "['us']" is no partition. Stopped before it, loudly, like any
    # commit that cannot be read.
    assert (stats.commits, stats.errors) == (0, 1), stats
    assert logged(app, TABLE) == []
    assert any("version 1" in r.getMessage() and "not a string" in r.getMessage()
               for r in caplog.records), caplog.text


def test_a_compaction_carrying_the_set_done_property_does_not_send_it_again(
        app: App, tmp_path: Path) -> None:
    location = tmp_path / "orders"
    follower = delta_follower(app, location)
    follower.run_once()
    v0 = write(location, ("20260101", "us", 1), done="datestamp=20260101")
    write(location, ("20260101", "us", 2))  # a second file in the partition: compacted
    # Spark's session-wide userMetadata, or a job passing its commit properties to
    # every call, puts the property on OPTIMIZE too: a rewrite changes no data.
    DeltaTable(str(location)).optimize.compact(
        commit_properties=CommitProperties(custom_metadata={SET_DONE: "datestamp=20260101"}))
    assert DeltaTable(str(location)).history(1)[0]["operation"] == "OPTIMIZE"

    follower.run_once()

    assert [m for m in logged(app, TABLE) if m.kind == "done"] == [
        Logged("done", "datestamp=20260101", v0)]


@pytest.fixture
def iceberg(app: App, tmp_path: Path) -> tuple[Follower, Table]:
    (tmp_path / "wh").mkdir()
    env = catalog_env("lake", f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh")
    info = app.publisher.register_table("sales", "orders", ["datestamp_day", "region"])
    LakehouseTables(app.store).register(info, "iceberg", catalog="lake")
    table = iceberg_table(load_catalog("lake", **catalog_properties("lake", env)))
    return Follower(app.publisher, "iceberg", catalogs=Catalogs(env),
                    read_timeout=READ_TIMEOUT), table


def commit_parent_cycle(table: Table) -> int:
    """Two snapshots that are each other's parent, the first made current, committed
    through pyiceberg's own commit path (it checks neither)."""
    from pyiceberg.table.update import AddSnapshotUpdate, SetSnapshotRefUpdate

    current = table.current_snapshot()
    assert current is not None
    seq = table.metadata.last_sequence_number
    a, b = 7_000_001, 7_000_002

    def snap(sid: int, parent: int, n: int) -> object:
        return current.model_copy(update={"snapshot_id": sid, "parent_snapshot_id": parent,
                                          "sequence_number": seq + n})

    with table.transaction() as tx:
        tx._apply((AddSnapshotUpdate(snapshot=snap(a, b, 1)),
                   AddSnapshotUpdate(snapshot=snap(b, a, 2)),
                   SetSnapshotRefUpdate(ref_name="main", type="branch", snapshot_id=a)))
    return a


def test_a_snapshot_parent_cycle_is_a_gap_not_an_endless_walk(
        app: App, iceberg: tuple[Follower, Table]) -> None:
    follower, table = iceberg
    follower.run_once()
    table.append(rows(table, ("2026-01-01", "us", 1)))
    follower.run_once()
    cursor = table.current_snapshot().snapshot_id
    head = commit_parent_cycle(table)

    stats = follower.run_once()

    # Before: the walk from the current snapshot to the cursor went round the cycle
    # for ever, on a thread nothing can stop, its list growing; the table was never
    # read again. The cursor is not an ancestor of the current snapshot: a gap.
    assert (stats.timeouts, stats.gaps) == (0, 1), stats
    assert logged(app, TABLE)[-1] == Logged("missed", str(cursor), head)


def test_an_iceberg_rewrite_carrying_the_set_done_property_does_not_send_it_again(
        app: App, iceberg: tuple[Follower, Table]) -> None:
    follower, table = iceberg
    follower.run_once()
    table.append(rows(table, ("2026-01-01", "us", 1)),
                 snapshot_properties={SET_DONE: "datestamp_day=2026-01-01"})
    first = table.current_snapshot().snapshot_id
    rewrite(table, {SET_DONE: "datestamp_day=2026-01-01"})

    follower.run_once()

    assert [m for m in logged(app, TABLE) if m.kind == "done"] == [
        Logged("done", "datestamp_day=2026-01-01", first)]


def test_a_huge_property_or_key_is_not_logged_whole(
        app: App, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    location = tmp_path / "orders"
    follower = delta_follower(app, location)
    write(location, ("20260101", "us", 1))
    follower.run_once()
    huge = "x" * 100_000
    write(location, ("20260102", "us", 2), done=f"datestamp={huge}")  # refused: too long
    log_entry(location, 2, {"commitInfo": {"operation": "WRITE"}},
              {"add": {"path": "p.parquet", "partitionValues": {huge: "1"}, "size": 1,
                       "modificationTime": 1, "dataChange": True}})

    with caplog.at_level(logging.WARNING):
        follower.run_once()
        follower.run_once()  # the stopped table says so again at every run

    # One line per refusal, at every run: the writer's text quoted, not all of it. (Only
    # warnings and errors: a test before this one may have left the logger at INFO.)
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(records) == 3, caplog.text
    assert all(len(r.getMessage()) < 2_000 for r in records), [
        len(r.getMessage()) for r in records]


def test_a_huge_delta_commit_is_read_a_line_at_a_time(app: App, tmp_path: Path) -> None:
    """A log version is read line by line: its memory is what it adds (one partition
    here), not its text (30 MB of adds of one partition, 50,000 files). Before, the
    whole file was held as bytes, then text, then lines: a commit of any size, or a file
    dropped in ``_delta_log`` by anyone who can write there, could exhaust serve."""
    import tracemalloc

    location = tmp_path / "orders"
    delta_follower(app, location)
    # Reading 30 MB under tracemalloc takes seconds, not what READ_TIMEOUT is for.
    follower = Follower(app.publisher, "delta", read_timeout=120)
    v0 = write(location, ("20260101", "us", 1))
    follower.run_once()
    pad = "x" * 500  # a real add carries column statistics of this order
    add = {"path": "", "partitionValues": {"datestamp": "20260102", "region": "eu"},
           "size": 1, "modificationTime": 1, "dataChange": True, "tags": {"pad": pad}}
    lines = [json.dumps({"commitInfo": {"operation": "WRITE"}})] + [
        json.dumps({"add": {**add, "path": f"f{i}.parquet"}}) for i in range(50_000)]
    (location / "_delta_log" / f"{v0 + 1:020d}.json").write_text("\n".join(lines) + "\n")
    size = (location / "_delta_log" / f"{v0 + 1:020d}.json").stat().st_size
    assert size > 30_000_000

    tracemalloc.start()
    try:
        stats = follower.run_once()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert (stats.commits, stats.errors) == (1, 0), stats
    assert [m.spec for m in logged(app, TABLE)][-1] == "datestamp=20260102/region=eu"
    assert peak < size / 4, f"peak {peak:,} bytes of Python memory for a {size:,}-byte commit"


def test_a_delta_log_line_beyond_the_bound_stops_the_table_naming_it(
        app: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    from partition_notify.writers.lakehouse import delta

    monkeypatch.setattr(delta, "MAX_ACTION_BYTES", 4096)
    location = tmp_path / "orders"
    follower = delta_follower(app, location)
    write(location, ("20260101", "us", 1))
    follower.run_once()
    log_entry(location, 1, {"commitInfo": {"operation": "WRITE", "pad": "y" * 10_000}})

    with caplog.at_level(logging.WARNING):
        stats = follower.run_once()

    assert (stats.commits, stats.errors) == (0, 1), stats
    assert any("version 1" in r.getMessage() and "4096 bytes" in r.getMessage()
               for r in caplog.records), caplog.text
