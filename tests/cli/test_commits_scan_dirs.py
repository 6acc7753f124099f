"""``commits scan DIR...`` / ``commits ignored DIR...``: a directory named on the
command line that cannot be a spool directory is refused in one line (exit 2),
naming the argument. Before: a typo, a file or a relative path printed an empty
scan and exit 0, as if nothing were spooled there. Real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serve.helpers import ROOT


def _cli(store_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PN_")},
           "PYTHONPATH": str(ROOT), "PN_STORE_URL": store_url,
           "PN_TRANSPORT_URL": "embedded://"}
    return subprocess.run([sys.executable, "-m", "partition_notify.cli", *args], cwd=ROOT,
                          env=env, text=True, capture_output=True, timeout=120)


@pytest.mark.parametrize("command", ["scan", "ignored"])
@pytest.mark.parametrize("kind", ["missing", "file", "relative", "remote"])
def test_a_dir_that_cannot_be_a_spool_dir_is_refused(sqlite_url: str, tmp_path: Path,
                                                     command: str, kind: str) -> None:
    (tmp_path / "afile").write_text("x")
    bad = {"missing": f"{tmp_path}/typo", "file": f"{tmp_path}/afile",
           "relative": "spool/extra", "remote": "hdfs://nn:8020/spool"}[kind]
    done = _cli(sqlite_url, "commits", command, str(tmp_path), bad)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"commits {command}: error: argument dirs: {bad!r}" in lines[0], lines
    assert done.stdout == ""


@pytest.mark.parametrize("command", ["scan", "ignored"])
def test_existing_local_dirs_are_scanned(sqlite_url: str, tmp_path: Path, command: str) -> None:
    (tmp_path / "b").mkdir()
    done = _cli(sqlite_url, "commits", command, str(tmp_path), f"file://{tmp_path}/b")
    assert done.returncode == 0, done.stderr
