"""``PN_SPARK_SPOOL_DIRS`` with a relative directory is refused when the settings load (one
line naming the variable and the entry, exit 1), as the Spark jar refuses a relative
``spoolDir``. Before: the pick-up dropped the entry without a word (it is no local
absolute path), so manifests spooled there were never announced. Real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serve.helpers import ROOT


def _cli(store_url: str, dirs: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PN_")},
           "PYTHONPATH": str(ROOT), "PN_STORE_URL": store_url,
           "PN_TRANSPORT_URL": "embedded://", "PN_SPARK_SPOOL_DIRS": dirs}
    return subprocess.run([sys.executable, "-m", "partition_notify.cli", *args], cwd=ROOT,
                          env=env, text=True, capture_output=True, timeout=120)


@pytest.mark.parametrize("args", [("serve", "--once"), ("commits", "scan")])
def test_a_relative_spool_dir_is_refused(sqlite_url: str, tmp_path: Path,
                                         args: tuple[str, ...]) -> None:
    done = _cli(sqlite_url, f"{tmp_path}, spool/extra", *args)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "PN_SPARK_SPOOL_DIRS=" in lines[0] and "'spool/extra'" in lines[0], lines
    assert "absolute" in lines[0], lines


def test_absolute_dirs_and_file_uris_are_accepted(sqlite_url: str, tmp_path: Path) -> None:
    done = _cli(sqlite_url, f"{tmp_path}/a,file://{tmp_path}/b,", "serve", "--once")
    assert done.returncode == 0, done.stderr


# Session 24: an entry that is a file, or on another filesystem, passed silently too.
@pytest.mark.parametrize("args", [("serve", "--once"), ("commits", "scan")])
def test_a_spool_dir_that_is_a_file_is_refused(sqlite_url: str, tmp_path: Path,
                                               args: tuple[str, ...]) -> None:
    (tmp_path / "afile").write_text("x")
    done = _cli(sqlite_url, f"{tmp_path},{tmp_path}/afile", *args)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"PN_SPARK_SPOOL_DIRS: {str(tmp_path / 'afile')!r} is not a directory" in lines[0]


@pytest.mark.parametrize("entry", ["hdfs://nn:8020/spool", "s3://bucket/spool"])
def test_a_spool_dir_on_another_filesystem_is_refused(sqlite_url: str, entry: str) -> None:
    done = _cli(sqlite_url, entry, "serve", "--once")
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"PN_SPARK_SPOOL_DIRS={entry!r}" in lines[0] and "local" in lines[0], lines


def test_a_missing_spool_dir_is_a_startup_warning(sqlite_url: str, tmp_path: Path) -> None:
    # Not created: the Spark jar creates it on its first spooled commit, and creating
    # it here could hide a mount that is missing. Not refused either, for that reason.
    done = _cli(sqlite_url, f"{tmp_path}/not-yet", "serve", "--once")
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "not-yet" in line]
    assert len(warned) == 1, done.stderr
    assert "WARNING" in warned[0] and "does not exist" in warned[0], warned
    assert not (tmp_path / "not-yet").exists()
