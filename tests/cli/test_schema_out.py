"""``schema --out DIR`` makes DIR, never its missing parents; a bad DIR is one line, exit 1.

Before (session 24): ``schema --out /nonexistent/dir/x.json`` created the whole tree
(``mkdir(parents=True)``): a typo in the parent went unnoticed and the files landed
somewhere nobody looks. The CLI's only other output location, ``demo --workdir``, is a
scratch directory the demo owns. Real files, the CLI's main().
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from partition_notify.cli import main


def _run(*argv: str) -> int:
    try:
        return main(list(argv))
    except SystemExit as exit_:
        return int(exit_.code or 0)


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    assert out == "", out
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_a_missing_parent_is_refused(tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "nonexistent" / "dir" / "x.json"
    assert _run("schema", "--out", str(out)) == 1
    line = _one_line(capsys)
    assert line == (f"partition-notify schema: error: --out {str(out)!r}: its parent "
                    f"{str(out.parent)!r} does not exist; expected a directory whose "
                    "parent exists"), line
    assert not (tmp_path / "nonexistent").exists(), "nothing was created"


def test_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.json").write_text("keep me")
    assert _run("schema", "--out", str(tmp_path / "x.json")) == 1
    assert "is not a directory" in _one_line(capsys)
    assert (tmp_path / "x.json").read_text() == "keep me"


def test_a_new_directory_under_an_existing_parent_is_made(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("schema", "--out", str(tmp_path / "schemas")) == 0
    written = capsys.readouterr().out.splitlines()
    assert written and all(Path(p).parent == tmp_path / "schemas" for p in written)
    assert all(isinstance(json.loads(Path(p).read_text()), dict) for p in written)
    assert _run("schema", "--out", str(tmp_path / "schemas")) == 0, "an existing one is fine"
