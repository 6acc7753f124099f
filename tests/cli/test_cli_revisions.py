"""``partition-notify rev ...`` and ``dataset ...``, run in-process on a SQLite store."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from partition_notify.revisions import RevisionManager, Snapshot
from partition_notify.store import Store
from partition_notify.writers.snapshot_dataset import SnapshotDataset

from partition_notify.app import build_app
from partition_notify.cli import main
from partition_notify.cli.entry import EXIT_ERROR, EXIT_USAGE, build_parser
from tests.support.clock import FakeClock

TABLE = "news.articles"


class Cli:
    """Runs ``main`` with ``--store-url`` and splits what it printed."""

    def __init__(self, url: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.url, self.capsys = url, capsys

    def __call__(self, *argv: str) -> tuple[int, list[Any], list[str]]:
        self.capsys.readouterr()
        try:
            code = main(["--store-url", self.url, *argv])
        except SystemExit as exit_:  # argparse: usage errors and --help
            code = int(exit_.code or 0)
        out, err = self.capsys.readouterr()
        return code, [json.loads(line) for line in out.splitlines()], err.splitlines()

    def ok(self, *argv: str) -> list[Any]:
        code, out, err = self(*argv)
        assert code == 0, err
        return out

    def fails(self, *argv: str, code: int = EXIT_ERROR) -> str:
        """The one stderr line of a failed command (and nothing on stdout)."""
        got, out, err = self(*argv)
        assert got == code
        assert out == []
        assert len(err) == 1, err
        assert "Traceback" not in err[0]
        return err[0]


@pytest.fixture
def cli(sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(sqlite_url, capsys)


COMMANDS = [
    ["rev", "begin"],
    ["rev", "commit"],
    ["rev", "abort"],
    ["rev", "keep-alive"],
    ["rev", "snapshot"],
    ["rev", "status"],
    ["rev", "tables"],
    ["dataset", "define"],
    ["dataset", "describe"],
    ["dataset", "versions"],
    ["dataset", "list"],
    ["dataset", "expire"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_help(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: partition-notify {' '.join(command)} ")


def test_import_loads_nothing_heavy() -> None:
    code = (
        "import sys, partition_notify.cli; "
        "print([m for m in ('sqlalchemy', 'pyspark', 'store', 'writers') if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.strip() == "[]"


def test_begin_commit_abort_and_snapshots(cli: Cli) -> None:
    [t1] = cli.ok("rev", "begin", TABLE, "--families", "a,b")
    [t2] = cli.ok("rev", "begin", TABLE, "--families", "a", "--keep-alive-seconds", "30")
    assert (t1["revision"], t1["families"]) == (1, ["a", "b"])
    assert (t2["revision"], t2["families"], t2["keepAlive"]) == (2, ["a"], 30.0)

    [status] = cli.ok("rev", "status", TABLE)
    assert [t["revision"] for t in status["running"]] == [1, 2]
    assert status["snapshot"]["revisions"] == {"a": 0, "b": 0}

    # 2 commits first, but 1 still runs on both families: nothing is visible yet.
    assert cli.ok("rev", "commit", TABLE, "2") == [
        {"table": TABLE, "revision": 2, "state": "committed"}
    ]
    [snap] = cli.ok("rev", "snapshot", TABLE)
    assert snap["revisions"] == {"a": 0, "b": 0}
    assert "transaction 1" in cli.fails("rev", "snapshot", TABLE, "--revision", "2")

    assert cli.ok("rev", "abort", TABLE, "1")[0]["state"] == "aborted"
    assert cli.ok("rev", "abort", TABLE, "1")[0]["state"] == "aborted"  # idempotent
    [snap] = cli.ok("rev", "snapshot", TABLE)
    assert snap == {
        "table": TABLE,
        "revisions": {"a": 2, "b": 2},
        "latestRevision": 2,
        "aborted": [1],
    }
    # The printed snapshot is what a job gets handed: it round-trips.
    assert Snapshot.from_dict(snap).includes(2, "a") and not Snapshot.from_dict(snap).includes(
        1, "b"
    )
    assert cli.ok("rev", "snapshot", TABLE, "--revision", "2") == [snap]
    assert cli.ok("rev", "tables") == [TABLE]

    line = cli.fails("rev", "commit", TABLE, "1")
    assert line.startswith("partition-notify rev commit: error: ") and "aborted" in line


def test_keep_alive_moves_the_deadline(cli: Cli) -> None:
    [tx] = cli.ok("rev", "begin", TABLE, "--keep-alive-seconds", "60")
    assert tx["families"] == ["data"]
    revision = str(tx["revision"])
    [kept] = cli.ok("rev", "keep-alive", TABLE, revision, "--keep-alive-seconds", "7200")
    assert kept["expiresAt"] >= tx["expiresAt"] + 7000
    assert kept["keepAlive"] == 60.0  # the period of later keep-alives is unchanged
    [again] = cli.ok("rev", "keep-alive", TABLE, revision)
    assert again["expiresAt"] < kept["expiresAt"]
    cli.ok("rev", "commit", TABLE, revision)
    assert "nothing to keep alive" in cli.fails("rev", "keep-alive", TABLE, revision)


def test_an_expired_transaction_cannot_commit(cli: Cli, sqlite_url: str) -> None:
    # Begun on a clock years in the past: its keep-alive ran out long ago.
    store = Store.open(sqlite_url)
    try:
        tx = RevisionManager(store, clock=FakeClock()).begin_write_transaction(
            TABLE, ["a"], keep_alive=60
        )
    finally:
        store.close()
    assert "expired at 1700000060.000" in cli.fails("rev", "commit", TABLE, str(tx.revision))
    [status] = cli.ok("rev", "status", TABLE)
    assert status["running"] == [] and status["aborted"] == [tx.revision]


@pytest.mark.parametrize(
    ("argv", "code", "words"),
    [
        (["rev", "commit", TABLE, "99"], EXIT_ERROR, "no transaction 99"),
        (["rev", "begin", TABLE, "--keep-alive-seconds", "-1"], EXIT_ERROR, "positive"),
        (["rev", "begin", TABLE, "--keep-alive-seconds", "nan"], EXIT_ERROR, "positive"),
        (["rev", "begin", TABLE, "--families", "a,"], EXIT_ERROR, "family ''"),
        (["rev", "begin", " x"], EXIT_ERROR, "surrounding spaces"),
        (["rev", "snapshot", TABLE, "--revision", "5"], EXIT_ERROR, "'news.articles'"),
        (["rev", "commit", TABLE, "one"], EXIT_USAGE, "invalid int value: 'one'"),
        (["rev"], EXIT_USAGE, "required"),
        (["dataset", "describe", "no.such"], EXIT_ERROR, "not defined"),
        (["dataset", "versions", "no.such"], EXIT_ERROR, "not defined"),
        (["dataset", "expire", "no.such"], EXIT_ERROR, "not defined"),
        (["dataset", "define", "w.x", "/tmp/x", "--min-versions", "0"], EXIT_ERROR, ">= 1"),
        (["dataset", "define", "w.x", "/tmp/x", "--ttl-seconds", "0"], EXIT_ERROR, "positive"),
        (["dataset", "define", "w.x", "/"], EXIT_ERROR, "location"),
        (["dataset", "define", "w.x", "data/x"], EXIT_ERROR, "absolute path or a URI"),
    ],
)
def test_bad_input_is_one_line(cli: Cli, argv: list[str], code: int, words: str) -> None:
    line = cli.fails(*argv, code=code)
    assert line.startswith("partition-notify ") and words in line


def test_unreachable_store_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # Port 1 refuses at once: the failure is the store's, reported without a traceback.
    code = main(["--store-url", "postgresql+psycopg://postgres@127.0.0.1:1/pn", "rev", "tables"])
    out, err = capsys.readouterr()
    assert code == EXIT_ERROR and out == ""
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("partition-notify rev tables: error: ")


def test_needs_no_broker(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    # A transport URL no transport accepts: building one would fail, so they must not.
    monkeypatch.setenv("PN_TRANSPORT_URL", "nosuch://broker")
    assert cli.ok("rev", "begin", TABLE)[0]["revision"] == 1
    assert "unknown scheme" in cli.fails("tables")  # once the store exists: tables only reads
    assert cli.ok("dataset", "list") == []


def _versions(store_url: str, name: str, n: int, files: bool) -> None:
    """``n`` committed runs; their directories hold a file when ``files``."""
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        ds = SnapshotDataset.open(app.datasets, name)  # no announcements
        for _ in range(n):
            run = ds.start()
            if files:
                Path(run.path).mkdir(parents=True)
                (Path(run.path) / "part-00000.parquet").write_bytes(b"PAR1")
            run.commit()


def test_dataset_define_versions_and_expire(cli: Cli, sqlite_url: str, tmp_path: Path) -> None:
    location = tmp_path / "customers"
    [ds] = cli.ok("dataset", "define", "w.customers", str(location), "--min-versions", "2")
    assert ds == {
        "dataset": "w.customers",
        "location": str(location),
        "currentVersion": None,
        "ttlSeconds": None,
        "minVersions": 2,
        "versions": [],
    }
    _versions(sqlite_url, "w.customers", 4, files=True)
    assert cli.ok("dataset", "list") == ["w.customers"]
    versions = cli.ok("dataset", "versions", "w.customers")
    assert [(v["version"], v["current"], v["state"]) for v in versions] == [
        (4, True, "complete"),
        (3, False, "complete"),
        (2, False, "complete"),
        (1, False, "complete"),
    ]

    # No TTL: everything but the newest two goes now, files included.
    assert cli.ok("dataset", "expire", "w.customers") == [
        {
            "removed": [
                {"dataset": "w.customers", "version": 2},
                {"dataset": "w.customers", "version": 1},
            ],
            "expiring": [],
        }
    ]
    assert sorted(p.name for p in location.iterdir()) == ["version=3", "version=4"]
    [described] = cli.ok("dataset", "describe", "w.customers")
    assert described["currentVersion"] == 4
    assert [v["version"] for v in described["versions"]] == [4, 3]

    # Redefining sets the retention; the location cannot move.
    retention = ["--ttl-seconds", "3600", "--min-versions", "1"]
    [ds] = cli.ok("dataset", "define", "w.customers", str(location), *retention)
    assert (ds["ttlSeconds"], ds["minVersions"]) == (3600.0, 1)
    assert "cannot move" in cli.fails("dataset", "define", "w.customers", str(tmp_path / "else"))
    # Version 3 was superseded just now: the TTL keeps it.
    assert cli.ok("dataset", "expire")[0]["removed"] == []
    assert sorted(p.name for p in location.iterdir()) == ["version=3", "version=4"]


def test_expire_of_remote_paths_without_spark_says_why(cli: Cli, sqlite_url: str) -> None:
    cli.ok("dataset", "define", "w.remote", "hdfs://namenode/data/remote")
    _versions(sqlite_url, "w.remote", 2, files=False)
    code, out, err = cli("dataset", "expire")
    assert code == EXIT_ERROR
    assert out[0]["removed"] == []
    assert [v["version"] for v in out[0]["expiring"]] == [1]
    assert err[-1].startswith("partition-notify dataset expire: error: 1 version(s) left expiring")
    assert "--spark" in err[-1] and "Traceback" not in "\n".join(err)
    # The current version is never touched.
    versions = cli.ok("dataset", "versions", "w.remote")
    assert [(v["version"], v["state"]) for v in versions] == [(2, "complete"), (1, "expiring")]


def _documented_commands() -> list[list[str]]:
    """The ``rev``/``dataset`` lines of the README, bracketed options dropped, ``a|b`` split."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    found = []
    for line in readme.splitlines():
        line = re.sub(r"\[[^]]*\]", "", line.split("#")[0])
        words = line.split()
        if words[:1] == ["partition-notify"] and words[1] in ("rev", "dataset"):
            for choice in words[2].split("|"):
                found.append([words[1], choice, *words[3:]])
    return found


def test_the_readme_lists_every_command_and_they_parse() -> None:
    documented = _documented_commands()
    assert {tuple(argv[:2]) for argv in documented} == {tuple(c) for c in COMMANDS}
    for argv in documented:
        assert build_parser().parse_args(argv).fn is not None


@pytest.mark.parametrize("command", ["snapshot", "status"])
@pytest.mark.parametrize("name", ["bad name", "no.such"])
def test_a_snapshot_of_an_unknown_name_is_one_line_naming_it(
    cli: Cli, command: str, name: str
) -> None:
    # Before: the empty snapshot, which a job would read as "nothing written yet".
    line = cli.fails("rev", command, name)
    assert repr(name) in line and "registered table" in line and "SNAPSHOT dataset" in line


def test_a_registered_table_without_revisions_has_the_empty_snapshot(cli: Cli) -> None:
    assert main(["--store-url", cli.url, "register", TABLE, "--keys", "ds"]) == 0
    [snap] = cli.ok("rev", "snapshot", TABLE)
    assert (snap["latestRevision"], snap["revisions"]) == (0, {})
