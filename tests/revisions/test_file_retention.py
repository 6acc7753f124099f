"""serve's housekeeping removes the data files no snapshot needs past their retention.

Defect (audit 23): an overwrite moves the replaced files to
``<partition>/_pn_retired/<write_id>/`` and nothing ever removed them; an
aborted write's data files stayed too, and once its rows were purged nothing
even recorded which files they were. Now ``serve``'s housekeeping deletes
retired files ``PN_RETIRED_FILE_RETENTION_SECONDS`` after their overwrite
committed, and an aborted write's files just before its rows are purged;
a snapshot pinned at a revision whose files went says so. Only files our rows
name, inside the table's location, in the directory they must be in, are
deleted. Real SQLite and PostgreSQL, real files, the injected clock.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from partition_notify.revisions.files import RevisionFiles
from sqlalchemy import text

from partition_notify.app import App
from partition_notify.cli.entry import main
from partition_notify.core.errors import NotFoundError
from partition_notify.serve.housekeeping import purge_all
from tests.support.clock import FakeClock, app_on_clock

T = "sales.orders"
DAY = 86400
#: The documented default of PN_RETIRED_FILE_RETENTION_SECONDS.
RETENTION = 7 * DAY


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_800_000_000.0)


app = pytest.fixture(name="app")(app_on_clock)


@pytest.fixture
def table(app: App, tmp_path: Path) -> Path:
    root = tmp_path / "warehouse" / "orders"
    root.mkdir(parents=True)
    app.publisher.register_table("sales", "orders", ["ds"], location=str(root))
    return root


def _write(root: Path, files: RevisionFiles, revision: int, write_id: str,
           *partitions: str) -> list[Path]:
    """Record and create the files of one write, as the writer's commit step does."""
    rel = [f"{p}/part-{write_id}.parquet" for p in partitions]
    files.record(T, revision, write_id, lambda: rel)
    out = []
    for r in rel:
        (root / r).parent.mkdir(parents=True, exist_ok=True)
        (root / r).write_bytes(b"PAR1 " + write_id.encode())
        out.append(root / r)
    return out


def _overwrite(root: Path, files: RevisionFiles, revision: int, write_id: str,
               partition: str) -> list[Path]:
    """Retire what ``partition`` holds (moved like HadoopFs.retire_files does), then write."""
    retired = root / partition / "_pn_retired" / write_id
    files.retire(T, revision, write_id, [partition], f"_pn_retired/{write_id}")
    retired.mkdir(parents=True)
    moved = []
    for f in sorted((root / partition).glob("part-*")):
        f.rename(retired / f.name)
        moved.append(retired / f.name)
    _write(root, files, revision, write_id, partition)
    return moved


def _count(app: App, sql: str) -> int:
    with app.store.engine.connect() as conn:
        return int(conn.execute(text(sql)).scalar() or 0)


def test_retired_files_go_after_the_retention_and_a_pinned_read_says_so(
        app: App, clock: FakeClock, table: Path, caplog: pytest.LogCaptureFixture) -> None:
    rm, files = app.revisions, RevisionFiles(app.revisions)
    first = rm.begin_write_transaction(T, ["data"])
    _write(table, files, first.revision, "w1", "ds=1", "ds=2")
    rm.commit_write_transaction(first)
    pinned = rm.create_snapshot(T)
    second = rm.begin_write_transaction(T, ["data"])
    retired = _overwrite(table, files, second.revision, "w2", "ds=1")
    rm.commit_write_transaction(second)
    assert files.visible(T, pinned) == ["ds=1/_pn_retired/w2/part-w1.parquet",
                                        "ds=2/part-w1.parquet"]

    clock.advance(RETENTION - 10)
    purge_all(app, 10, None)
    assert all(f.exists() for f in retired), "not old enough yet"
    assert len(files.visible(T, pinned)) == 2

    clock.advance(20)
    purge_all(app, 10, None)
    assert not any(f.exists() for f in retired), "the retired files are deleted"
    assert not (table / "ds=1" / "_pn_retired").exists(), "and their emptied directories"
    assert (table / "ds=2" / "part-w1.parquet").exists()
    assert files.visible(T, rm.create_snapshot(T)) == ["ds=1/part-w2.parquet",
                                                       "ds=2/part-w1.parquet"]
    with pytest.raises(NotFoundError) as caught:
        files.visible(T, pinned)
    message = str(caught.value)
    for part in (T, f"revision {pinned.revision('data')}", "removed",
                 "PN_RETIRED_FILE_RETENTION_SECONDS", "7 days"):
        assert part in message, message
    assert "\n" not in message

    caplog.clear()
    with caplog.at_level(logging.INFO):
        again = purge_all(app, 10, None)
    assert again.revision_files == 0, "a second pass has nothing to retry"
    assert _count(app, "SELECT count(*) FROM pn_revision_files WHERE removed_at IS NOT NULL") \
        == 1


def test_a_pinned_snapshot_from_the_cli_names_the_removed_files(
        app: App, clock: FakeClock, table: Path, store_url: str,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    rm, files = app.revisions, RevisionFiles(app.revisions)
    first = rm.begin_write_transaction(T, ["data"])
    _write(table, files, first.revision, "w1", "ds=1")
    rm.commit_write_transaction(first)
    second = rm.begin_write_transaction(T, ["data"])
    _overwrite(table, files, second.revision, "w2", "ds=1")
    rm.commit_write_transaction(second)
    clock.advance(RETENTION + 1)
    purge_all(app, 10, None)

    monkeypatch.setenv("PN_STORE_URL", store_url)
    code = main(["rev", "snapshot", T, "--revision", str(first.revision)])
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert len(err.splitlines()) == 1, err
    assert "PN_RETIRED_FILE_RETENTION_SECONDS" in err and T in err, err
    assert main(["rev", "snapshot", T]) == 0, "latest is fine"


def test_an_aborted_writes_files_go_before_its_rows(
        app: App, clock: FakeClock, table: Path) -> None:
    rm, files = app.revisions, RevisionFiles(app.revisions)
    ok = rm.begin_write_transaction(T, ["data"])
    kept = _write(table, files, ok.revision, "w1", "ds=1")
    rm.commit_write_transaction(ok)
    failed = rm.begin_write_transaction(T, ["data"])
    aborted = _write(table, files, failed.revision, "w2", "ds=1", "ds=2")
    aborted[1].unlink()  # a file already gone is fine
    rm.abort_write_transaction(failed)

    clock.advance(app.settings.revision_abort_retention_seconds + 1)
    purged = purge_all(app, 10, None)
    assert not aborted[0].exists(), "the aborted write's data file is deleted"
    assert all(f.exists() for f in kept)
    assert purged.revision_txns == 1 and purged.revision_files == 1
    assert _count(app, "SELECT count(*) FROM pn_revision_files") == 1, "w1's row only"
    assert files.visible(T, rm.create_snapshot(T)) == ["ds=1/part-w1.parquet"]


def test_rows_naming_paths_outside_their_directory_delete_nothing(
        app: App, clock: FakeClock, table: Path, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    rm, files = app.revisions, RevisionFiles(app.revisions)
    outside = tmp_path / "precious"
    outside.mkdir()
    victims = [outside / "x.parquet", outside / "abs.parquet", outside / "linked.parquet"]
    for v in victims:
        v.write_bytes(b"keep me")
    (table / "ds=5").symlink_to(outside, target_is_directory=True)
    (table / "ds=6").mkdir()
    (table / "ds=6" / "adir.parquet").mkdir()  # a directory is never deleted
    (table / "ds=6" / "adir.parquet" / "inner").write_bytes(b"keep me")
    ok = rm.begin_write_transaction(T, ["data"])
    committed = _write(table, files, ok.revision, "w1", "ds=7")
    rm.commit_write_transaction(ok)
    bad = rm.begin_write_transaction(T, ["data"])
    files.record(T, bad.revision, "evil", lambda: [
        "../precious/x.parquet", f"{outside}/abs.parquet", "ds=5/linked.parquet",
        "ds=6/adir.parquet", "ds=7/part-w1.parquet"])  # the last: committed data
    rm.abort_write_transaction(bad)

    clock.advance(app.settings.revision_abort_retention_seconds + 1)
    with caplog.at_level(logging.WARNING):
        purge_all(app, 10, None)
    assert all(v.read_bytes() == b"keep me" for v in victims), "nothing outside is deleted"
    assert (table / "ds=6" / "adir.parquet" / "inner").exists()
    assert committed[0].exists(), "another revision's file is not the aborted write's"
    refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refused) == 5, refused
    assert any("../precious/x.parquet" in m for m in refused), refused

    caplog.clear()
    with caplog.at_level(logging.WARNING):
        purge_all(app, 10, None)
    assert not [r for r in caplog.records if "refused" in r.getMessage()], "logged once"


def test_a_retired_row_outside_its_retired_directory_is_refused(
        app: App, clock: FakeClock, table: Path, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    rm, files = app.revisions, RevisionFiles(app.revisions)
    first = rm.begin_write_transaction(T, ["data"])
    live = _write(table, files, first.revision, "w1", "ds=1")
    rm.commit_write_transaction(first)
    second = rm.begin_write_transaction(T, ["data"])
    # A row whose retired_to points at the partition's live data, not _pn_retired/<id>.
    files.retire(T, second.revision, "w2", ["ds=1"], "../ds=1")
    rm.commit_write_transaction(second)

    clock.advance(RETENTION + 1)
    with caplog.at_level(logging.WARNING):
        purge_all(app, 10, None)
    assert all(f.exists() for f in live)
    assert [r for r in caplog.records if "refused" in r.getMessage()]


def test_a_later_revisions_file_an_overwrite_marked_retired_stays(
        app: App, clock: FakeClock, table: Path) -> None:
    """A write running across an overwrite recorded its files before the overwrite
    retired the partition: the overwrite neither hides nor retires the later
    revision's file, which lands in the partition; the latest snapshot lists it
    there and it stays."""
    rm, files = app.revisions, RevisionFiles(app.revisions)
    first = rm.begin_write_transaction(T, ["data"])
    _write(table, files, first.revision, "w1", "ds=1")
    rm.commit_write_transaction(first)
    overwrite = rm.begin_write_transaction(T, ["data"])
    later = rm.begin_write_transaction(T, ["data"])
    files.record(T, later.revision, "w3", lambda: ["ds=1/part-w3.parquet"])
    moved = _overwrite(table, files, overwrite.revision, "w2", "ds=1")
    (table / "ds=1" / "part-w3.parquet").write_bytes(b"PAR1 w3")  # w3's commit moves it in
    rm.commit_write_transaction(overwrite)
    rm.commit_write_transaction(later)
    latest = files.visible(T, rm.create_snapshot(T))
    assert "ds=1/part-w3.parquet" in latest

    clock.advance(RETENTION + 1)
    purge_all(app, 10, None)
    assert not moved[0].exists(), "w1's file, hidden by the overwrite, goes"
    assert (table / "ds=1" / "part-w3.parquet").exists()
    assert files.visible(T, rm.create_snapshot(T)) == latest


def test_a_file_that_cannot_be_deleted_is_logged_once_and_retried_a_bounded_number_of_times(
        app: App, clock: FakeClock, table: Path, caplog: pytest.LogCaptureFixture) -> None:
    from partition_notify.revisions.vacuum import MAX_REMOVE_ATTEMPTS

    rm, files = app.revisions, RevisionFiles(app.revisions)
    bad = rm.begin_write_transaction(T, ["data"])
    # The OS refuses this name for real (ENAMETOOLONG): not a refusal of ours.
    files.record(T, bad.revision, "w9", lambda: ["ds=1/" + "p" * 300])
    (table / "ds=1").mkdir()
    rm.abort_write_transaction(bad)
    clock.advance(app.settings.revision_abort_retention_seconds + 1)
    with caplog.at_level(logging.WARNING):
        for _ in range(MAX_REMOVE_ATTEMPTS - 1):
            purge_all(app, 10, None)
    assert len([r for r in caplog.records if "could not delete" in r.getMessage()]) == 1
    assert _count(app, "SELECT count(*) FROM pn_revision_txns") == 1, "kept to retry"
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        purge_all(app, 10, None)
    assert [r for r in caplog.records if "giving up" in r.getMessage()]
    assert _count(app, "SELECT count(*) FROM pn_revision_txns") == 0, "bounded: purged"


def test_tables_without_a_local_location_keep_their_files_and_purge_their_rows(
        app: App, clock: FakeClock) -> None:
    rm, files = app.revisions, RevisionFiles(app.revisions)
    app.publisher.register_table("sales", "orders", ["ds"], location="hdfs://nn/wh/orders")
    tx = rm.begin_write_transaction(T, ["data"])
    files.record(T, tx.revision, "w1", lambda: ["ds=1/part-w1.parquet"])
    rm.abort_write_transaction(tx)
    clock.advance(app.settings.revision_abort_retention_seconds + 1)
    purged = purge_all(app, 10, None)
    assert purged.revision_txns == 1 and purged.revision_files == 0


def test_a_retired_files_hadoop_checksum_goes_with_it(app: App, clock: FakeClock,
                                                      table: Path) -> None:
    """Hadoop's local filesystem writes ``.<name>.crc`` beside each file and moves it
    along with it: left behind, the emptied ``_pn_retired/<write_id>`` stayed for ever.
    Another dot-file there, and a checksum that is a symlink, are not the file's: they
    stay (and so does the directory)."""
    rm, files = app.revisions, RevisionFiles(app.revisions)
    first = rm.begin_write_transaction(T, ["data"])
    _write(table, files, first.revision, "w1", "ds=1", "ds=2")
    for ds in ("ds=1", "ds=2"):
        (table / ds / ".part-w1.parquet.crc").write_bytes(b"crc")
    rm.commit_write_transaction(first)
    second = rm.begin_write_transaction(T, ["data"])
    files.retire(T, second.revision, "w2", ["ds=1", "ds=2"], "_pn_retired/w2")
    for ds in ("ds=1", "ds=2"):
        retired = table / ds / "_pn_retired" / "w2"
        retired.mkdir(parents=True)
        for f in (table / ds).glob("*part-w1*"):
            f.rename(retired / f.name)
    outside = table / "elsewhere.crc"
    outside.write_bytes(b"not ours")
    (table / "ds=2" / "_pn_retired" / "w2" / ".part-w1.parquet.crc").unlink()
    (table / "ds=2" / "_pn_retired" / "w2" / ".part-w1.parquet.crc").symlink_to(outside)
    rm.commit_write_transaction(second)

    clock.advance(RETENTION + 1)
    purge_all(app, 10, None)
    assert not (table / "ds=1" / "_pn_retired").exists(), "file, checksum and directory go"
    left = sorted(p.name for p in (table / "ds=2" / "_pn_retired" / "w2").iterdir())
    assert left == [".part-w1.parquet.crc"], "a symlinked checksum is not followed or removed"
    assert outside.read_bytes() == b"not ours"


def test_the_checksum_of_a_retired_file_already_gone_goes_too(app: App, clock: FakeClock,
                                                              table: Path) -> None:
    """Someone deleted a retired data file by hand and left its ``.crc``: the file
    counts as removed, and its checksum must not keep the directory for ever."""
    rm, files = app.revisions, RevisionFiles(app.revisions)
    first = rm.begin_write_transaction(T, ["data"])
    _write(table, files, first.revision, "w1", "ds=1")
    (table / "ds=1" / ".part-w1.parquet.crc").write_bytes(b"crc")
    rm.commit_write_transaction(first)
    second = rm.begin_write_transaction(T, ["data"])
    retired = _overwrite(table, files, second.revision, "w2", "ds=1")
    (table / "ds=1" / ".part-w1.parquet.crc").rename(retired[0].parent / ".part-w1.parquet.crc")
    rm.commit_write_transaction(second)
    retired[0].unlink()

    clock.advance(RETENTION + 1)
    purge_all(app, 10, None)
    assert not (table / "ds=1" / "_pn_retired").exists(), "checksum and directory go"
