"""Read commands never create a store: a missing SQLite file is one line naming
it (exit 1); ``tables`` and ``serve`` say which store they use (issue 24)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from partition_notify import build_app
from partition_notify.cli import main
from tests.support.accounts import ROOT

READS = [("tables",), ("history", "a.b"), ("wait", "a.b", "ds=1", "--timeout", "5"),
         ("wait", "a.b", "ds=1", "--timeout", "5", "--fail-on-late"),
         ("tail", "a.b", "--timeout", "5")]


@pytest.mark.parametrize("argv", READS, ids=lambda argv: "-".join(argv[:1] + argv[-1:]))
def test_a_read_command_on_a_missing_sqlite_file_creates_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: tuple[str, ...]
) -> None:
    missing = tmp_path / "elsewhere.db"
    capsys.readouterr()
    code = main(["--store-url", f"sqlite:///{missing}", *argv])
    err = capsys.readouterr().err.splitlines()
    assert code == 1, err
    assert len(err) == 1 and f"(file {missing.resolve()}) does not exist" in err[0], err
    assert "--store-url or PN_STORE_URL" in err[0]
    assert not missing.exists(), "a read command created the store"
    assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())


def test_the_default_store_is_resolved_against_the_working_directory(tmp_path: Path) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PN_")}
    done = subprocess.run([sys.executable, "-m", "partition_notify.cli", "tables"], cwd=tmp_path,
                          env={**clean, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    assert f"(file {tmp_path.resolve() / 'partition-notify.db'})" in done.stderr, done.stderr
    assert not (tmp_path / "partition-notify.db").exists()


def test_tables_names_the_store_on_stderr(
    capsys: pytest.CaptureFixture[str], sqlite_url: str
) -> None:
    with build_app(store_url=sqlite_url) as app:
        app.publisher.register_table("s", "t", ["ds"])
    capsys.readouterr()
    assert main(["--store-url", sqlite_url, "tables"]) == 0
    out, err = capsys.readouterr()
    path = Path(sqlite_url.removeprefix("sqlite:///")).resolve()
    assert err.splitlines() == [f"store: {sqlite_url} (file {path})"], err
    assert out.startswith("s.t\tkeys=ds"), out
