"""``partition-notify demo`` never deletes what it did not create (issue 10, item 17)."""

from __future__ import annotations

from pathlib import Path

import pytest

from partition_notify.cli import main
from partition_notify.cli.entry import EXIT_ERROR


def demo(capsys: pytest.CaptureFixture[str], workdir: Path | str) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["demo", "--no-spark", "--workdir", str(workdir)])
    return code, capsys.readouterr().err.splitlines()


def test_a_directory_it_did_not_create_is_left_alone(capsys, tmp_path):
    precious = tmp_path / "notes.txt"
    precious.write_text("mine")
    code, err = demo(capsys, tmp_path)
    assert code == EXIT_ERROR
    assert len(err) == 1 and "not created by the demo" in err[0], err
    assert precious.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_dot_as_workdir_is_left_alone(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src.py").write_text("x = 1\n")
    code, _ = demo(capsys, ".")
    assert code == EXIT_ERROR
    assert (tmp_path / "src.py").read_text() == "x = 1\n"


def test_rerun_replaces_only_its_own_files(capsys, tmp_path):
    workdir = tmp_path / "run"
    assert demo(capsys, workdir)[0] == 0
    mine = workdir / "keep-me.txt"
    mine.write_text("mine")
    assert demo(capsys, workdir)[0] == 0
    assert mine.read_text() == "mine"


def test_an_empty_existing_directory_is_used(capsys, tmp_path):
    workdir = tmp_path / "empty"
    workdir.mkdir()
    assert demo(capsys, workdir)[0] == 0
    assert (workdir / "store.db").exists()


def test_a_demo_line_is_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipeline and the live scheduler print from two threads: print() writes the
    text and its newline separately, so their lines ran together
    ("marked datestamp=20110228 done[  0.220s] live ...")."""
    import io
    import sys

    from partition_notify.cli import demo

    writes: list[str] = []

    class Recorder(io.StringIO):
        def write(self, s: str) -> int:
            writes.append(s)
            return len(s)

    monkeypatch.setattr(sys, "stdout", Recorder())
    demo._say(0.0, "pipeline", "marked datestamp=20110228 done")
    assert len(writes) == 1 and writes[0].endswith("done\n")
