"""SIGTERM stops ``serve`` whichever of its threads the kernel hands the signal to.

A process-directed signal goes to any thread that does not block it. Python
runs its handler in the main thread, but only once that thread runs bytecode
again: a main thread parked in an untimed ``Event.wait()`` never did when the
signal landed on the metrics or scheduler thread, and ``serve`` ignored SIGTERM
for good (seen in CI: ``proc.communicate(timeout=30)`` expired). ``tgkill``
aims the signal at one chosen thread, so the case is not left to chance.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serve.helpers import serve_with_metrics, wait_healthy
from tests.support.net import free_port

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tgkill is Linux's")


def _tgkill(pid: int, tid: int, signum: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.tgkill(pid, tid, signum) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill({pid}, {tid}, {signum})")


def _other_threads(pid: int) -> list[int]:
    """The kernel ids of every thread of ``pid`` but the main one (which has the pid)."""
    return sorted(int(task.name) for task in Path(f"/proc/{pid}/task").iterdir()
                  if int(task.name) != pid)


def test_sigterm_delivered_to_another_thread_stops_serve(sqlite_url: str) -> None:
    port = free_port()
    proc = serve_with_metrics(sqlite_url, port)
    try:
        wait_healthy(proc, f"http://127.0.0.1:{port}/healthz")
        others = _other_threads(proc.pid)
        assert others, "serve runs its jobs and metrics on threads of their own"
        _tgkill(proc.pid, others[0], signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"serve ignored a SIGTERM delivered to thread {others[0]} for 20 s") from None
        assert proc.returncode == 0, err
        assert "signal 15: draining and stopping" in err, err
        assert "stopped" in err.splitlines()[-1], err[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
