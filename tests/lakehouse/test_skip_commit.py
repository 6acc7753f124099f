"""A followed table stopped on a commit it cannot announce, and the operator's way past it:
``partition-notify lakehouse skip db.table --version N`` (and ``POST
/v1/tables/{table}/lakehouse/skip``). Real delta-rs and pyiceberg tables, hand-written log
entries for what no writer should commit; store: SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable, write_deltalake
from partition_notify.writers.commit_refusals import CommitRefusals
from partition_notify.writers.lakehouse.follower import Follower
from partition_notify.writers.lakehouse.iceberg import Catalogs, catalog_properties
from partition_notify.writers.lakehouse.store import LakehouseTables

from partition_notify.app import App
from partition_notify.cli.entry import main
from tests.lakehouse.helpers import Logged, catalog_env, delta_rows, iceberg_table, logged, rows

TABLE = "sales.orders"
KEYS = ["datestamp", "region"]


def write(location: Path, *data: tuple[str, str, int]) -> int:
    write_deltalake(str(location), delta_rows(*data), mode="append", partition_by=KEYS)
    return DeltaTable(str(location)).version()


def log_entry(location: Path, version: int, values: dict[str, str]) -> None:
    """A hand-written log version adding one file of partition ``values``."""
    actions = [
        {"commitInfo": {"operation": "WRITE"}},
        {
            "add": {
                "path": f"p{version}.parquet",
                "partitionValues": values,
                "size": 1,
                "modificationTime": 1,
                "dataChange": True,
            }
        },
    ]
    text = "".join(json.dumps(a) + "\n" for a in actions)
    (location / "_delta_log" / f"{version:020d}.json").write_text(text)


def cli(capsys: pytest.CaptureFixture[str], store_url: str, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main(["--store-url", store_url, "--transport-url", "embedded://", *argv])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def stopped(app: App, tmp_path: Path) -> tuple[Follower, Path]:
    """A Delta table stopped on version 1: a partition value over 1,024 characters."""
    location = tmp_path / "orders"
    info = app.publisher.register_table("sales", "orders", KEYS)
    LakehouseTables(app.store).register(info, "delta", location=str(location))
    follower = Follower(app.publisher, "delta")
    write(location, ("20260101", "us", 1))
    follower.run_once()  # follows after version 0
    log_entry(location, 1, {"datestamp": "20260102", "region": "r" * 1_100})
    log_entry(location, 2, {"datestamp": "20260103", "region": "us"})
    for _ in range(2):
        stats = follower.run_once()
        assert (stats.commits, stats.errors) == (0, 1), stats
    return follower, location


def test_a_delta_table_stopped_on_a_commit_goes_on_once_the_operator_skips_it(
    app: App, store_url: str, stopped: tuple[Follower, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    follower, _ = stopped
    followed = LakehouseTables(app.store).get(app.publisher.table("sales", "orders").id)
    assert followed is not None and followed.stopped_at == 1

    code, out, err = cli(capsys, store_url, "lakehouse", "skip", TABLE, "--version", "1")

    assert (code, err) == (0, ""), err
    assert "skipped delta commit 1 of sales.orders" in out
    stats = follower.run_once()
    assert (stats.commits, stats.errors) == (1, 0), stats
    # Subscribers see the loss where the commit was, then the next commit's partition.
    assert logged(app, TABLE) == [
        Logged("missed", "0", 1),
        Logged("add", "datestamp=20260103/region=us", 2),
    ]
    (audit,) = CommitRefusals(app.store).latest(10)
    assert (audit.status, audit.table) == ("skipped", TABLE)
    assert "delta commit 1" in audit.reason and "1024" in audit.reason
    assert audit.principal.startswith("cli:")


@pytest.mark.parametrize("version", ["0", "2", "99"])
def test_only_the_commit_the_table_is_stopped_on_can_be_skipped(
    app: App,
    store_url: str,
    stopped: tuple[Follower, Path],
    version: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = cli(capsys, store_url, "lakehouse", "skip", TABLE, "--version", version)

    assert (code, out) == (1, "")
    assert err.count("\n") == 1, err
    assert f"stopped on commit 1, not {version}" in err
    assert logged(app, TABLE) == []
    assert CommitRefusals(app.store).latest(10) == []


def test_a_table_that_is_not_stopped_has_nothing_to_skip(
    app: App, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = tmp_path / "orders"
    info = app.publisher.register_table("sales", "orders", KEYS)
    LakehouseTables(app.store).register(info, "delta", location=str(location))
    write(location, ("20260101", "us", 1))
    Follower(app.publisher, "delta").run_once()

    code, _, err = cli(capsys, store_url, "lakehouse", "skip", TABLE, "--version", "1")

    assert code == 1 and err.count("\n") == 1, err
    assert "sales.orders is not stopped on a commit" in err
    app.publisher.register_table("sales", "plain", KEYS)
    code, _, err = cli(capsys, store_url, "lakehouse", "skip", "sales.plain", "--version", "1")
    assert code == 1 and "not followed as an Iceberg or Delta table" in err, err


def test_an_iceberg_snapshot_with_a_value_too_long_can_be_skipped(
    app: App, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pyiceberg.catalog import load_catalog

    (tmp_path / "wh").mkdir()
    env = catalog_env("lake", f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh")
    catalog = load_catalog("lake", **catalog_properties("lake", env))
    table = iceberg_table(catalog)
    with table.transaction() as tx:  # file names without the partition path: no
        tx.set_properties(
            {
                "write.object-storage.enabled": "true",  # 1,100-char dir
                "write.object-storage.partitioned-paths": "false",
            }
        )
    table.append(rows(table, ("2026-01-01", "us", 1)))
    info = app.publisher.register_table("sales", "orders", ["datestamp_day", "region"])
    LakehouseTables(app.store).register(info, "iceberg", catalog="lake")
    follower = Follower(app.publisher, "iceberg", catalogs=Catalogs(env))
    follower.run_once()  # after the first snapshot
    table.append(rows(table, ("2026-01-02", "r" * 1_100, 2)))
    bad = table.current_snapshot()
    assert bad is not None
    table.append(rows(table, ("2026-01-03", "us", 3)))
    assert follower.run_once().errors == 1
    assert follower.run_once().errors == 1  # stopped: no way past it but the skip

    code, _, err = cli(
        capsys, store_url, "lakehouse", "skip", TABLE, "--version", str(bad.snapshot_id)
    )

    assert (code, err) == (0, ""), err
    stats = follower.run_once()
    assert (stats.errors, stats.commits) == (0, 1), stats
    missed, after = logged(app, TABLE)
    assert (missed.kind, missed.revision) == ("missed", bad.snapshot_id)
    assert after.spec == "datestamp_day=2026-01-03/region=us"


def test_a_stop_recorded_after_the_skip_does_not_stop_the_table_again(
    app: App, store_url: str, stopped: tuple[Follower, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The follower's read failed before the operator's skip and records the stop after it
    (a race): the skipped commit is the cursor now, and the table is not stopped on it."""
    follower, _ = stopped
    code, _, err = cli(capsys, store_url, "lakehouse", "skip", TABLE, "--version", "1")
    assert code == 0, err
    info = app.publisher.table("sales", "orders")
    LakehouseTables(app.store).stop(info.id, follower.owner, 1, "read before the skip")

    followed = LakehouseTables(app.store).get(info.id)
    assert followed is not None and (followed.cursor, followed.stopped_at) == (1, None)


def test_a_stopped_table_is_counted_for_the_metrics_until_it_is_skipped(
    app: App, store_url: str, stopped: tuple[Follower, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # serve exports the count as pn_lakehouse_stopped{format}: on call alerts on a frozen table.
    follower, _ = stopped
    assert follower.run_once().stopped == 1
    code, _, err = cli(capsys, store_url, "lakehouse", "skip", TABLE, "--version", "1")
    assert code == 0, err
    assert follower.run_once().stopped == 0
