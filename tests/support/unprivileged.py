"""Run the product as a user the kernel refuses: a REAL permission-denied.

The suite runs as root, and root reads and writes any file whatever its mode,
so a test that only ``chmod``s a file proves nothing. Here the product's
process runs as ``nobody`` (``setpriv``, else ``runuser``; root only); a caller
that is not root is itself refused by a file's mode and runs the process as it
is. Either way a probe first checks that the kernel does refuse (a mode-000 file
must not open) and that the interpreter starts as that user (its venv must be
readable to it); if no way exists the test is skipped on a laptop and fails in
CI (``CI=true``), as a missing service does (tests/support/ci.py).

The files a test prepares live in :func:`shared_dir`: a directory that user
can reach (pytest's ``tmp_path`` is below a mode-700 directory of root's).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.support.accounts import ROOT
from tests.support.ci import require

#: The account the product runs as when the suite is root (Debian's ``nobody``).
NOBODY_UID = NOBODY_GID = 65534


def _prefix() -> list[str]:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is not None:
        return [setpriv, f"--reuid={NOBODY_UID}", f"--regid={NOBODY_GID}", "--clear-groups",
                "--"]
    runuser = shutil.which("runuser")  # util-linux without setpriv: keeps the environment
    return [] if runuser is None else [runuser, "-u", "nobody", "--"]


@functools.cache
def _refused() -> str | None:
    """None if the process :func:`run` starts is refused a mode-000 file; else why not."""
    with tempfile.TemporaryDirectory(prefix="pn-probe-") as d:
        os.chmod(d, 0o755)
        secret = Path(d, "secret")
        secret.write_text("x")
        secret.chmod(0)
        code = ("import sys\ntry:\n    open(sys.argv[1])\nexcept PermissionError:\n"
                "    sys.exit(0)\nsys.exit(1)\n")
        try:
            done = subprocess.run([*_prefix(), sys.executable, "-c", code, str(secret)],
                                  capture_output=True, text=True, timeout=60, check=False)
        except OSError as exc:
            return f"cannot start an unprivileged process: {exc}"
    if done.returncode == 0:
        return None
    if done.returncode == 1:
        return "this process and its children read any file (root without setpriv?)"
    return f"{sys.executable} does not run unprivileged: {done.stderr.strip()[-300:]}"


def require_unprivileged() -> None:
    """Skip (fail in CI) unless :func:`run` meets real permission checks."""
    why = _refused()
    require(why is None, f"no unprivileged process: {why}")


def user() -> tuple[int, int]:
    """The uid and gid :func:`run`'s process has: the owner to give a file it may write."""
    return (NOBODY_UID, NOBODY_GID) if _prefix() else (os.getuid(), os.getgid())


def run(argv: Sequence[str], *, cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``argv`` (after the interpreter: ``["-m", "partition_notify.cli", ...]``) run
    unprivileged with none of the caller's ``PN_*`` settings, to its end."""
    require_unprivileged()
    return subprocess.run(command(argv), cwd=cwd, env=environment(env), text=True,
                          capture_output=True, timeout=timeout, check=False)


def command(argv: Sequence[str]) -> list[str]:
    """The command line that runs the interpreter with ``argv`` unprivileged."""
    return [*_prefix(), sys.executable, *argv]


def environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without its ``PN_*`` settings, plus ``env``; HOME is
    somewhere the user may not write (as nobody's is)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PN_")}
    return {**clean, "PYTHONPATH": str(ROOT), "HOME": "/nonexistent",
            "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}


def cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``partition-notify args`` run unprivileged."""
    return run(["-m", "partition_notify.cli", *args], cwd=cwd, env=env)


@contextmanager
def shared_dir() -> Iterator[Path]:
    """A fresh directory (mode 755, root's when the suite is root) that the
    unprivileged process can reach; removed afterwards whatever the test chmod'ed."""
    path = Path(tempfile.mkdtemp(prefix="pn-perm-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for dirpath, dirnames, _ in os.walk(path):
            for name in dirnames:
                os.chmod(os.path.join(dirpath, name), 0o755)
        shutil.rmtree(path, ignore_errors=True)


def writable_by_user(path: Path) -> Path:
    """Give ``path`` to the unprivileged user (a directory it may write into)."""
    uid, gid = user()
    os.chown(path, uid, gid)
    return path
