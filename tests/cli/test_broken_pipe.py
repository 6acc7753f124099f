"""`partition-notify history … | head -1`: the reader leaving early is not an error.

It printed a BrokenPipeError traceback (and exit 1, "nothing was saved") once
`head` had closed the pipe; Unix tools end quietly there, with 141 (128 + SIGPIPE).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from partition_notify.cli.entry import EXIT_BROKEN_PIPE

ROOT = Path(__file__).resolve().parents[2]


def test_a_closed_stdout_ends_the_command_quietly(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    base = [sys.executable, "-m", "partition_notify.cli", "--store-url",
            f"sqlite:///{tmp_path}/s.db"]
    subprocess.run([*base, "register", "bp.t", "--keys", "ds"], env=env, check=True,
                   capture_output=True, timeout=60)
    for i in range(3):
        subprocess.run([*base, "mark-done", "bp.t", f"ds={i}"], env=env, check=True,
                       capture_output=True, timeout=60)
    read_fd, write_fd = os.pipe()
    os.close(read_fd)  # the reader is gone before the first line
    try:
        proc = subprocess.run([*base, "history", "bp.t"], env=env, stdout=write_fd,
                              stderr=subprocess.PIPE, timeout=60, check=False)
    finally:
        os.close(write_fd)
    err = proc.stderr.decode()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert err.strip() == "" and proc.returncode == EXIT_BROKEN_PIPE == 141, (proc.returncode, err)


def test_schema_out_with_a_closed_stdout_writes_the_files_and_ends_quietly(
        tmp_path: Path) -> None:
    """``schema --out DIR | head -1`` said ``--out 'DIR': cannot write there (Broken
    pipe)``, exit 1: stdout's broken pipe was taken for the directory's failure."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = tmp_path / "schemas"
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    try:
        proc = subprocess.run([sys.executable, "-m", "partition_notify.cli", "schema",
                               "--out", str(out)], env=env, stdout=write_fd,
                              stderr=subprocess.PIPE, timeout=60, check=False)
    finally:
        os.close(write_fd)
    err = proc.stderr.decode()
    assert err.strip() == "" and proc.returncode == EXIT_BROKEN_PIPE, (proc.returncode, err)
    # Every file is written however early the reader left: they are the command's output.
    from partition_notify.contract import json_schemas

    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{name}.schema.json" for name in json_schemas())
