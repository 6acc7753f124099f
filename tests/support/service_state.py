"""What the service manager shares: its directory, the state file, logging, deadlines.

The state file lists the services ``up`` started, one name a line, so that
``down`` stops only those; a service that was already running is left alone.
Stdlib only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

SERVICES_DIR = Path(os.environ.get("PN_SERVICES_DIR", "/tmp/partition-notify-services"))
# The name predates the Python manager; kept so state written by either is understood.
STATE_FILE = SERVICES_DIR / "started-by-services-sh"


def log(message: str) -> None:
    print(f"[services] {message}", file=sys.stderr, flush=True)


class Failures:
    """What went wrong during one command (``up`` goes on with the other services)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def add(self, name: str, why: str) -> bool:
        log(f"FAILED: {name} {why}")
        self.names.append(name)
        return False


class State:
    """The services ``up`` started (and ``down`` may therefore stop)."""

    def __init__(self, path: Path = STATE_FILE) -> None:
        self.path = path

    def names(self) -> list[str]:
        try:
            return [n for n in self.path.read_text().splitlines() if n]
        except FileNotFoundError:
            return []

    def has(self, name: str) -> bool:
        return name in self.names()

    def add(self, name: str) -> None:
        if not self.has(name):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as fh:
                fh.write(name + "\n")

    def remove(self, name: str) -> None:
        if self.path.exists():
            keep = [n for n in self.names() if n != name]
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text("".join(n + "\n" for n in keep))
            tmp.replace(self.path)


def run(argv: list[str], timeout: float, *, out: Path | None = None,
        env: dict[str, str] | None = None, show: bool = False) -> bool:
    """Run a command with a deadline; True if it exited 0.

    Output goes to ``out``, or to our stderr with ``show``, or nowhere.
    """
    try:
        if out is None:
            sink = sys.stderr if show else subprocess.DEVNULL
            done = subprocess.run(argv, timeout=timeout, stdin=subprocess.DEVNULL,
                                  stdout=sink, stderr=sink, env=env, check=False)
        else:
            with open(out, "ab") as fh:
                done = subprocess.run(argv, timeout=timeout, stdin=subprocess.DEVNULL,
                                      stdout=fh, stderr=subprocess.STDOUT, env=env, check=False)
    except subprocess.TimeoutExpired:
        log(f"timeout: {' '.join(argv[:3])} ... did not finish within {timeout:g} s")
        return False
    except OSError as exc:
        log(f"cannot run {argv[0]}: {exc}")
        return False
    return done.returncode == 0


def pid_of(pidfile: Path, pattern: str) -> int | None:
    """The pid in ``pidfile`` if that process is alive and its command line contains ``pattern``.

    The pattern guards against a recycled pid: never signal a stranger.
    """
    try:
        pid = int(pidfile.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except (OSError, ValueError):
        return None
    return pid if pattern.encode() in cmdline else None


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists() or _zombie(pid):
            return True
        time.sleep(0.2)  # another process's exit: nothing to wait on but its /proc entry
    return False


def _zombie(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    return True


def stop_pidfile(name: str, pidfile: Path, pattern: str) -> bool:
    """TERM, wait 30 s, then KILL the process of ``pidfile``; True once it is gone."""
    pid = pid_of(pidfile, pattern)
    if pid is not None:
        log(f"{name}: stopping pid {pid}")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not _gone(pid, 30):
            log(f"{name}: still running after 30 s, sending KILL")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            if not _gone(pid, 10):
                log(f"{name}: pid {pid} did not exit")
                return False
    pidfile.unlink(missing_ok=True)
    return True


def wait_ready(what: str, probe: Callable[[], bool], timeout: float) -> bool:
    """Poll ``probe()`` every 0.5 s until true or ``timeout`` seconds passed."""
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() >= deadline:
            log(f"timeout: {what} not ready after {timeout:g}s")
            return False
        time.sleep(0.5)  # another process's readiness: there is no event to wait on
    return True
