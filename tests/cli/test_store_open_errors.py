"""A store that cannot be opened is one line naming it and why (session 18).

Before: a NUL in the SQLite path ended in a traceback (ValueError: embedded null
byte); a missing directory or a file that is not a database said only "unable to
open database file" / "file is not a database", naming no file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from partition_notify.cli import main


def _register(url: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    capsys.readouterr()
    try:
        code = main(["--store-url", url, "register", "db.t", "--keys", "a"])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, capsys.readouterr().err.strip().splitlines()


def test_a_missing_directory_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _register(f"sqlite:///{tmp_path}/nope/store.db", capsys)
    assert code == 1 and len(err) == 1, err
    assert f"directory {tmp_path}/nope does not exist" in err[0], err


def test_a_file_that_is_not_a_database_is_named(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "g.db").write_text("not a database\n" * 100)
    code, err = _register(f"sqlite:///{tmp_path}/g.db", capsys)
    assert code == 1 and len(err) == 1, err
    assert "file is not a database" in err[0] and f"file {tmp_path}/g.db" in err[0], err


def test_a_nul_in_the_path_is_one_line(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _register(f"sqlite:///{tmp_path}/a%00b.db", capsys)
    assert code == 1 and len(err) == 1, err
    assert "NUL character" in err[0], err
