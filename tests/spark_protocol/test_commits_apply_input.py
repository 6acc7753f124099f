"""``partition-notify commits apply`` reads at most a manifest's worth of its input.

The spool scan reads a manifest with a bound (``read_manifest_file``); the
command read its file or stdin whole and only then compared the size: a
wrong path (a device, a multi-GB data file) or an endless pipe grew the
process until the kernel or the allocator stopped it.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import IO

from partition_notify.writers.commit_manifest import MAX_MANIFEST_BYTES

ROOT = Path(__file__).resolve().parents[2]
#: Far above what the CLI needs, far below what reading /dev/zero to its end takes.
MEMORY_LIMIT = 1 << 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def apply(source: str, tmp_path: Path, stdin: IO[bytes] | None = None,
          pass_fds: tuple[int, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PN_STORE_URL": f"sqlite:///{tmp_path}/pn.db",
           "PN_TRANSPORT_URL": "embedded://"}
    return subprocess.run(
        [sys.executable, "-m", "partition_notify.cli", "commits", "apply", source],
        stdin=stdin if stdin is not None else subprocess.DEVNULL, capture_output=True,
        text=True, env=env, cwd=ROOT, timeout=60, preexec_fn=_limit_memory, pass_fds=pass_fds)


def _refused_for_size(proc: subprocess.CompletedProcess[str]) -> None:
    lines = proc.stderr.splitlines()
    assert proc.returncode == 1 and len(lines) == 1, (proc.returncode, proc.stderr[-2000:])
    assert lines[0] == ("partition-notify commits apply: error: manifest is more than "
                        f"{MAX_MANIFEST_BYTES} bytes, the most a manifest may have"), lines[0]


def test_an_endless_file_is_refused_after_the_manifest_limit(tmp_path: Path) -> None:
    _refused_for_size(apply("/dev/zero", tmp_path))


def test_an_endless_stdin_is_refused_after_the_manifest_limit(tmp_path: Path) -> None:
    with open("/dev/zero", "rb") as zero:
        _refused_for_size(apply("-", tmp_path, stdin=zero))


def test_a_file_over_the_limit_is_refused_and_one_at_the_limit_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (MAX_MANIFEST_BYTES + 1))
    _refused_for_size(apply(str(big), tmp_path))
    big.write_bytes(b"{}" + b" " * (MAX_MANIFEST_BYTES - 2))  # read, then found wanting
    proc = apply(str(big), tmp_path)
    assert proc.returncode == 1
    assert "manifest field 'version'" in proc.stderr, proc.stderr


def test_a_fifo_nobody_writes_ends_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "manifest.fifo"
    os.mkfifo(fifo)
    proc = apply(str(fifo), tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("partition-notify commits apply: error: manifest is not JSON")


def test_a_pipe_with_a_writer_is_read(tmp_path: Path) -> None:
    """Process substitution (``commits apply <(...)``) hands over a pipe: still read."""
    read_end, write_end = os.pipe()
    os.write(write_end, b"{}")
    os.close(write_end)
    try:
        proc = apply(f"/dev/fd/{read_end}", tmp_path, pass_fds=(read_end,))
    finally:
        os.close(read_end)
    assert proc.returncode == 1
    assert "manifest field 'version'" in proc.stderr, proc.stderr
