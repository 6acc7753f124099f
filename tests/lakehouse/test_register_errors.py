"""``register --format`` reads the table's current commit first; a catalog or location it
cannot read is the CLI's one line and exit 1, like every other refusal, not the
driver's traceback (pyarrow, SQLAlchemy, requests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.accounts import ROOT
from tests.support.net import free_port

CATALOG = "PN_ICEBERG_CATALOG__BAD__"


def cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``partition-notify *args`` on the test's SQLite store, with ``env`` added."""
    full = {**os.environ, "PN_STORE_URL": f"sqlite:///{tmp_path}/store.db",
            "PN_TRANSPORT_URL": "embedded://", "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-m", "partition_notify.cli", *args], env=full,
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def register(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return cli(tmp_path, "register", "sales.orders", "--keys", "datestamp", *args, **env)


def lake(tmp_path: Path) -> dict[str, str]:
    """An Iceberg table (keys datestamp_day, region) with one commit in SQL catalog
    "lake"; the PN_ICEBERG_CATALOG__LAKE__* settings that reach it."""
    from pyiceberg.catalog import load_catalog

    from tests.lakehouse.helpers import iceberg_table, rows

    (tmp_path / "wh").mkdir()
    props = {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db",
             "warehouse": (tmp_path / "wh").as_uri()}
    table = iceberg_table(load_catalog("lake", **props))
    table.append(rows(table, ("2026-01-01", "us", 1)))
    return {f"PN_ICEBERG_CATALOG__LAKE__{k.upper()}": v for k, v in props.items()}


@pytest.mark.parametrize("case", ["unknown-scheme", "sql-catalog", "rest-catalog"])
def test_a_table_that_cannot_be_read_is_one_line(tmp_path: Path, case: str) -> None:
    if case == "unknown-scheme":  # pyarrow: ArrowInvalid, "Unrecognized filesystem type"
        done = register(tmp_path, "--format", "delta", "--location", "nosuchscheme://b/t")
    elif case == "sql-catalog":  # SQLAlchemy: OperationalError, unable to open database
        done = register(tmp_path, "--format", "iceberg", "--catalog", "bad", **{
            f"{CATALOG}TYPE": "sql", f"{CATALOG}URI": f"sqlite:///{tmp_path}/no/dir/c.db"})
    else:  # requests: ConnectionError, nothing listens there
        done = register(tmp_path, "--format", "iceberg", "--catalog", "bad", **{
            f"{CATALOG}TYPE": "rest", f"{CATALOG}URI": f"http://127.0.0.1:{free_port()}"})
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr[-2000:]
    assert done.stderr.startswith("partition-notify register: error: "), done.stderr
    assert "cannot be read" in done.stderr


def test_keys_that_are_not_the_delta_tables_partition_columns_are_refused(
        tmp_path: Path) -> None:
    from deltalake import write_deltalake

    from tests.lakehouse.helpers import delta_rows

    location = str(tmp_path / "orders")
    write_deltalake(location, delta_rows(("20260101", "us", 1)),
                    partition_by=["datestamp", "region"])
    # Before: registered (exit 0), and the follower then stopped at the table's next
    # commit at every run ("partition fields ... are not the registered keys").
    done = register(tmp_path, "--format", "delta", "--location", location)  # keys: datestamp
    assert done.returncode == 1, done.stdout + done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "partition columns ['datestamp', 'region']" in done.stderr, done.stderr
    ok = cli(tmp_path, "register", "sales.orders", "--keys", "region,datestamp", "--format",
             "delta", "--location", location)
    assert ok.returncode == 0, ok.stderr  # the same columns, in the order subscribers use


def test_keys_that_no_partition_field_of_the_iceberg_table_has_are_refused(
        tmp_path: Path) -> None:
    env = lake(tmp_path)  # datestamp_day, region
    # Before: registered (exit 0) with the column's name instead of the field's, and the
    # follower then stopped at the table's next commit at every run ("partition spec 0
    # has fields [...], which do not give the registered key 'datestamp'").
    done = register(tmp_path, "--format", "iceberg", "--catalog", "lake", **env)
    assert done.returncode == 1, done.stdout + done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "'datestamp'" in done.stderr and "datestamp_day" in done.stderr, done.stderr
    ok = cli(tmp_path, "register", "sales.orders", "--keys", "datestamp_day", "--format",
             "iceberg", "--catalog", "lake", **env)
    assert ok.returncode == 0, ok.stderr  # a subset of the fields: the files' partitions


def test_alter_keys_of_a_followed_iceberg_table_are_checked_like_registers(
        tmp_path: Path) -> None:
    env = lake(tmp_path)  # datestamp_day, region

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return cli(tmp_path, *args, **env)

    assert run("register", "sales.orders", "--keys", "datestamp_day", "--format",
               "iceberg", "--catalog", "lake").returncode == 0
    # Before: altered (exit 0) to keys the table's commits cannot give; the follower
    # then stopped at the next commit at every run.
    bad = run("alter", "sales.orders", "--keys", "datestamp,region")
    assert bad.returncode == 1, bad.stdout + bad.stderr[-2000:]
    assert bad.stderr.count("\n") == 1 and "'datestamp'" in bad.stderr, bad.stderr
    assert "keys=datestamp_day\t" in run("tables").stdout
    good = run("alter", "sales.orders", "--keys", "datestamp_day,region")
    assert good.returncode == 0, good.stderr


@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
def test_a_followed_table_with_no_commit_yet_is_registered_with_a_warning(
        tmp_path: Path, fmt: str) -> None:
    """A table not created yet is followed from its first commit (README), so a typo in
    --identifier or --location registered silently and announced nothing, ever: register
    says on stderr that it found no commit there."""
    env = lake(tmp_path)
    where = (["--catalog", "lake", "--identifier", "sales.ordres"] if fmt == "iceberg"
             else ["--location", str(tmp_path / "ordres")])
    done = cli(tmp_path, "register", "sales.orders", "--keys", "datestamp_day", "--format",
               fmt, *where, **env)
    assert done.returncode == 0, done.stderr
    assert "after_commit=-1" in done.stdout, done.stdout
    assert done.stderr.startswith("partition-notify register: warning: "), done.stderr
    assert done.stderr.count("\n") == 1 and "ordres" in done.stderr, done.stderr
    assert "first commit" in done.stderr, done.stderr


def test_the_location_of_a_followed_delta_table_does_not_change_under_its_follower(
        tmp_path: Path) -> None:
    """alter --location of a table followed as Delta changed the table's location but not
    the follower's (it kept reading the old _delta_log), silently: refused, naming it."""
    from deltalake import write_deltalake

    from tests.lakehouse.helpers import delta_rows

    location = str(tmp_path / "orders")
    write_deltalake(location, delta_rows(("20260101", "us", 1)),
                    partition_by=["datestamp", "region"])

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return cli(tmp_path, *args)

    assert run("register", "sales.orders", "--keys", "datestamp,region", "--format",
               "delta", "--location", location).returncode == 0
    moved = run("alter", "sales.orders", "--location", str(tmp_path / "elsewhere"))
    assert moved.returncode == 1, moved.stdout + moved.stderr[-2000:]
    assert moved.stderr.count("\n") == 1 and location in moved.stderr, moved.stderr
    same = run("alter", "sales.orders", "--location", location, "--retention-seconds", "60")
    assert same.returncode == 0, same.stderr
