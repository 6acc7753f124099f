"""Delta tables written by delta-rs, followed version by version (store: SQLite and
PostgreSQL, tests/conftest.py's ``app``)."""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path

import pytest
from deltalake import CommitProperties, DeltaTable, TableFeatures, write_deltalake
from partition_notify.writers.lakehouse.follower import Follower
from partition_notify.writers.lakehouse.store import LakehouseTables

from partition_notify.app import App
from tests.lakehouse.helpers import Logged, delta_rows, logged

TABLE = "sales.orders"
KEYS = ["datestamp", "region"]
SET_DONE = "partition-notify.mark-set-done"


@pytest.fixture
def location(tmp_path: Path) -> str:
    return str(tmp_path / "orders")


@pytest.fixture
def follower(app: App, location: str) -> Follower:
    info = app.publisher.register_table("sales", "orders", KEYS)
    LakehouseTables(app.store).register(info, "delta", location=location)
    return Follower(app.publisher, "delta")


def write(location: str, *data: tuple[str, str, int], mode: str = "append",
          predicate: str | None = None, metadata: dict[str, str] | None = None) -> int:
    write_deltalake(location, delta_rows(*data), mode=mode,
                    partition_by=KEYS, predicate=predicate,
                    commit_properties=CommitProperties(custom_metadata=metadata)
                    if metadata else None)
    return DeltaTable(location).version()


def add(spec: str, revision: int) -> Logged:
    return Logged("add", spec, revision)


def test_versions_announce_new_partitions_overwrites_and_the_set_done(
        app: App, location: str, follower: Follower) -> None:
    follower.run_once()  # before the table exists: follows it from version 0
    v0 = write(location, ("20260101", "us", 1), ("20260101", "eu", 2),
               metadata={"userMetadata": f"{SET_DONE}=datestamp=20260101"})
    v1 = write(location, ("20260101", "us", 3), ("20260102", "us", 4))
    v2 = write(location, ("20260102", "us", 5), mode="overwrite",
               predicate="datestamp = '20260102'", metadata={SET_DONE: "datestamp=20260102"})
    DeltaTable(location).delete("region = 'eu'")
    DeltaTable(location).optimize.compact()

    stats = follower.run_once()

    assert (stats.commits, stats.gaps, stats.errors) == (5, 0, 0)
    got = logged(app, TABLE)
    # Within a version, in the order of its add actions (delta-rs does not sort them).
    assert set(got[:2]) == {add("datestamp=20260101/region=us", v0),
                            add("datestamp=20260101/region=eu", v0)}
    assert got[2:] == [
        Logged("done", "datestamp=20260101", v0),
        add("datestamp=20260102/region=us", v1),
        add("datestamp=20260102/region=us", v2),  # overwritten: again, at v2
        Logged("done", "datestamp=20260102", v2),
    ]
    assert follower.run_once().commits == 0


def test_a_checkpoint_in_the_middle_and_a_restart_change_nothing(
        app: App, location: str, follower: Follower) -> None:
    follower.run_once()
    write(location, ("20260101", "us", 1))
    follower.run_once()
    DeltaTable(location).create_checkpoint()
    write(location, ("20260101", "us", 2), ("20260102", "us", 3))
    follower.release()
    restarted = Follower(app.publisher, "delta")
    assert restarted.run_once().commits == 1
    write(location, ("20260103", "us", 4))
    assert restarted.run_once().commits == 1
    assert [m.spec for m in logged(app, TABLE)] == [
        "datestamp=20260101/region=us", "datestamp=20260102/region=us",
        "datestamp=20260103/region=us"]


def test_a_cleaned_log_version_is_a_gap(
        app: App, location: str, follower: Follower,
        caplog: pytest.LogCaptureFixture) -> None:
    write(location, ("20260101", "us", 1))
    follower.run_once()  # starts after version 0
    write(location, ("20260102", "us", 2))
    write(location, ("20260103", "us", 3))
    DeltaTable(location).create_checkpoint()
    # What log cleanup does to versions older than the checkpoint.
    (Path(location) / "_delta_log" / f"{1:020d}.json").unlink()

    with caplog.at_level(logging.WARNING):
        stats = follower.run_once()

    assert (stats.gaps, stats.commits) == (1, 0)
    assert any("GAP" in r.getMessage() and "1..1" in r.getMessage() for r in caplog.records)
    assert logged(app, TABLE) == [Logged("missed", "0", 2)]  # after version 0, on after 2
    write(location, ("20260104", "us", 4))
    follower.run_once()
    assert [m.spec for m in logged(app, TABLE)] == ["0", "datestamp=20260104/region=us"]


def test_a_gap_before_the_first_commit_handled_reaches_subscribers(
        app: App, location: str, follower: Follower) -> None:
    from tests.store.helpers import Collector

    got = Collector()
    with app.subscriber() as sub:
        sub.subscribe(("sales", "orders"), got, history=False)
        follower.run_once()  # before the table exists: follows it from version 0
        for day in ("20260101", "20260102", "20260103"):
            write(location, (day, "us", 1))
        DeltaTable(location).create_checkpoint()  # then log cleanup takes version 1
        (Path(location) / "_delta_log" / f"{1:020d}.json").unlink()
        assert follower.run_once().gaps == 1
        write(location, ("20260104", "us", 4))
        follower.run_once()
        # afterRevision is null: no commit was handled. Before, the body left the field
        # out and decode() (every subscriber, tail, the /ui events page) refused it as
        # malformed: the one message saying commits were lost was itself lost.
        assert got.wait_for(lambda ms: len(ms) == 2, 10), got.messages
    assert [m.event_type for m in got.messages] == ["COMMITS_MISSED", "ADD_PARTITION"]
    assert logged(app, TABLE)[0] == Logged("missed", "None", 2)


def test_a_table_deleted_and_created_again_is_a_gap_not_silence(
        app: App, location: str, follower: Follower) -> None:
    follower.run_once()
    for day in ("20260101", "20260102", "20260103"):
        write(location, (day, "us", 1))
    follower.run_once()  # versions 0..2 announced
    shutil.rmtree(location)  # a full refresh that deletes the directory
    write(location, ("20260201", "us", 1))
    write(location, ("20260202", "us", 1))

    stats = follower.run_once()

    # Before: nothing at all. The cheap check looked for version 3, which the new log
    # does not have yet, and the reader for versions after 2: the new table's versions
    # 0..2 were skipped without a word, and version 3 was announced as if nothing
    # had happened.
    assert stats.gaps == 1, stats
    assert logged(app, TABLE)[3:] == [Logged("missed", "2", 1)]
    write(location, ("20260203", "us", 1))
    follower.run_once()
    assert logged(app, TABLE)[4:] == [add("datestamp=20260203/region=us", 2)]


def test_a_second_serve_does_not_follow_a_leased_table(
        app: App, location: str, follower: Follower) -> None:
    follower.run_once()
    write(location, ("20260101", "us", 1))
    other = Follower(app.publisher, "delta")
    assert other.run_once().leased_elsewhere == 1
    assert follower.run_once().commits == 1
    assert len(logged(app, TABLE)) == 1


def test_a_subscriber_gets_the_gap_in_order_between_the_commits(
        app: App, location: str, follower: Follower) -> None:
    from partition_notify.contract import CommitsMissedMessage
    from tests.store.helpers import Collector

    got = Collector()
    with app.subscriber() as sub:
        sub.subscribe(("sales", "orders"), got, history=False)
        write(location, ("20260101", "us", 1))
        follower.run_once()  # starts after version 0
        write(location, ("20260102", "us", 2))
        follower.run_once()  # version 1 announced
        write(location, ("20260103", "us", 3))
        write(location, ("20260104", "us", 4))
        DeltaTable(location).create_checkpoint()
        (Path(location) / "_delta_log" / f"{2:020d}.json").unlink()  # cleaned unread
        follower.run_once()
        write(location, ("20260105", "us", 5))
        follower.run_once()
        assert got.wait_for(lambda ms: len(ms) == 3, 10), got.messages
    added, missed, after = got.messages
    assert added.partitions == [{"datestamp": "20260102", "region": "us"}]
    assert isinstance(missed, CommitsMissedMessage)
    assert (missed.table_format, missed.after_revision, missed.revision) == ("delta", 1, 3)
    assert "2..2" in missed.reason and location in missed.reason
    assert after.partitions == [{"datestamp": "20260105", "region": "us"}]
    assert [m.topic_seq for m in got.messages] == [1, 2, 3]  # no seq gap: nothing lost
    assert sub.stats.gaps == 0


def test_vacuum_announces_nothing_and_a_follower_behind_it_still_reads_the_log(
        app: App, location: str, follower: Follower) -> None:
    assert write(location, ("20260101", "us", 1), ("20260102", "us", 2)) == 0
    follower.run_once()  # starts after version 0
    v1 = write(location, ("20260101", "us", 3), mode="overwrite",
               predicate="datestamp = '20260101'")
    v2 = write(location, ("20260103", "us", 4))
    # Removes the data files v1 replaced (not log entries): no dry run, no retention.
    removed = DeltaTable(location).vacuum(retention_hours=0, enforce_retention_duration=False,
                                          dry_run=False)
    assert removed, "vacuum removed no data file"
    v3 = write(location, ("20260104", "us", 5))
    assert v3 == v2 + 3  # delta-rs logged VACUUM START and VACUUM END as versions

    stats = follower.run_once()  # behind the vacuum: reads v1.. from the log

    assert (stats.gaps, stats.errors) == (0, 0)
    assert logged(app, TABLE) == [
        add("datestamp=20260101/region=us", v1),  # replaced by the predicate overwrite
        add("datestamp=20260103/region=us", v2),
        add("datestamp=20260104/region=us", v3),  # the vacuum's own versions: nothing
    ]
    assert follower.run_once().commits == 0


def test_a_table_partitioned_anew_stops_naming_the_keys_to_register_it_with(
        app: App, location: str, follower: Follower, caplog: pytest.LogCaptureFixture) -> None:
    """An overwrite that changes the partition columns (delta-rs ``schema_mode=
    "overwrite"``): the follower stops there, and its warning says what to do for a Delta
    table (keys cannot change once announced: register it again with its new columns)."""
    write(location, ("20260101", "us", 1))
    follower.run_once()
    write_deltalake(location, delta_rows(("20260102", "us", 2)), mode="overwrite",
                    partition_by=["datestamp"], schema_mode="overwrite")

    with caplog.at_level(logging.WARNING):
        stats = follower.run_once()

    assert (stats.stopped, stats.commits) == (1, 0), stats
    warning = next(r.getMessage() for r in caplog.records if "version 1" in r.getMessage())
    # Before: "(register the table with the partition field names, e.g. datestamp_day
    # for day(datestamp))": an Iceberg hint, and a table announced from cannot be altered.
    assert "datestamp_day" not in warning, warning
    assert "unregister" in warning and "--keys datestamp" in warning, warning
    assert "lakehouse skip sales.orders --version 1" in warning, warning


def test_restore_announces_the_partitions_whose_data_it_brings_back(
        app: App, location: str, follower: Follower) -> None:
    """RESTORE (delta-rs ``restore``) commits adds and removes with dataChange=true: a
    partition whose earlier files it brings back is announced again (its data changed);
    one it removes is a delete (no event), as for any commit; OPTIMIZE after it, nothing."""
    write(location, ("20260101", "us", 1))
    follower.run_once()  # starts after version 0
    v1 = write(location, ("20260102", "us", 2))
    v2 = write(location, ("20260101", "us", 9), mode="overwrite",
               predicate="datestamp = '20260101'")
    DeltaTable(location).restore(0)  # 20260101 back to version 0's file, 20260102 gone
    v3 = DeltaTable(location).version()
    DeltaTable(location).restore(v2)  # both back as at v2
    v4 = DeltaTable(location).version()
    DeltaTable(location).optimize.z_order(["v"])

    stats = follower.run_once()

    assert (stats.commits, stats.gaps, stats.errors) == (5, 0, 0), stats
    got = logged(app, TABLE)
    assert got[:3] == [add("datestamp=20260102/region=us", v1),
                       add("datestamp=20260101/region=us", v2),
                       add("datestamp=20260101/region=us", v3)]
    assert set(got[3:]) == {add("datestamp=20260101/region=us", v4),
                            add("datestamp=20260102/region=us", v4)}
    assert len(got) == 5


def test_a_delete_by_deletion_vector_is_a_delete(
        app: App, location: str, follower: Follower) -> None:
    """delta-rs 1.6 takes the deletionVectors feature but rewrites files; Spark's DELETE
    on such a table commits, per the Delta protocol, the file's remove and its add again
    with a ``deletionVector``: crafted so here. A delete: nothing announced, and the
    table (loaded by delta-rs past it) goes on."""
    write(location, ("20260101", "us", 1), ("20260101", "us", 2))
    DeltaTable(location).alter.add_feature([TableFeatures.DeletionVectors],
                                           allow_protocol_versions_increase=True)
    follower.run_once()  # starts after version 1
    log = Path(location) / "_delta_log"
    data = next(json.loads(line)["add"] for line in
                (log / f"{0:020d}.json").read_text().splitlines() if '"add"' in line)
    now = int(time.time() * 1000)
    dv = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 1,
          "sizeInBytes": 36, "cardinality": 1}
    (log / f"{2:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in [
        {"commitInfo": {"timestamp": now, "operation": "DELETE"}},
        {"remove": {"path": data["path"], "deletionTimestamp": now, "dataChange": True,
                    "partitionValues": data["partitionValues"], "size": data["size"]}},
        {"add": {**data, "modificationTime": now, "deletionVector": dv}},
    ]))
    v3 = write(location, ("20260102", "us", 3))

    stats = follower.run_once()

    assert (stats.commits, stats.gaps, stats.errors) == (2, 0, 0), stats
    assert logged(app, TABLE) == [add("datestamp=20260102/region=us", v3)]
