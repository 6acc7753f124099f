"""``partition-notify demo`` with a workdir the user may not write or read, run as a
user the kernel refuses (tests/support/unprivileged.py): one line naming the
workdir and what was expected, exit 1, nothing deleted or half-written.

Before: a traceback (PermissionError) from writing the demo's marker file or
listing the directory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import unprivileged


@pytest.fixture
def folder() -> Iterator[Path]:
    unprivileged.require_unprivileged()
    with unprivileged.shared_dir() as d:
        yield d


def _demo(workdir: Path) -> str:
    done = unprivileged.cli("demo", "--no-spark", "--workdir", str(workdir), cwd=workdir.parent)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, (done.returncode, done.stderr[-2000:])
    return lines[0]


def test_an_empty_workdir_the_user_may_not_write(folder: Path) -> None:
    workdir = folder / "run"
    workdir.mkdir()
    line = _demo(workdir)
    assert f"demo workdir '{workdir}' is not writable by this process (uid " in line, line
    assert list(workdir.iterdir()) == []


def test_a_workdir_the_user_may_not_read(folder: Path) -> None:
    workdir = folder / "run"
    workdir.mkdir(mode=0o700)
    line = _demo(workdir)
    assert f"demo workdir '{workdir}' is not readable by this process (uid " in line, line


def test_a_demo_workdir_whose_files_the_user_may_not_remove(folder: Path) -> None:
    # The demo's own earlier run, by root: the user may not replace its files.
    workdir = folder / "run"
    workdir.mkdir()
    (workdir / ".partition-notify-demo").write_text("created by partition-notify demo\n")
    (workdir / "store.db").write_text("an earlier run's store")
    line = _demo(workdir)
    assert f"demo workdir '{workdir}' is not writable by this process (uid " in line, line
    assert (workdir / "store.db").read_text() == "an earlier run's store"
