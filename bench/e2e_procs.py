"""The processes an end-to-end bench starts, each in its own process group, all stopped at exit.

Airflow's components fork (the LocalExecutor's workers, the triggerer's
trigger runner, the api-server's workers, the dag-processor's parsers), so a
process is started as a session leader and stopped by signalling its whole
group: SIGTERM, then SIGKILL after a grace period. Only groups this module
started are signalled. ``Procs`` is a context manager and also stops
everything on SIGTERM/SIGINT (turned into ``KeyboardInterrupt``), so a
Ctrl-C or a failed round leaves nothing running.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType

#: SIGTERM to SIGKILL: Airflow's scheduler and triggerer take a few seconds to wind down.
STOP_GRACE_SECONDS = 20.0
#: Every readiness wait polls a separate process this often (it has no other signal).
POLL_SECONDS = 0.2


@contextlib.contextmanager
def bench_dir(prefix: str, keep: bool) -> Iterator[Path]:
    """A new temporary directory with ``logs/`` for one bench run; removed afterwards
    unless ``keep`` or the run failed (its logs are the evidence), then its path is printed."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    (tmp / "logs").mkdir()
    failed = True
    try:
        yield tmp
        failed = False
    finally:
        if keep or failed:
            print(f"kept {tmp}" + (" (the run failed)" if failed else ""), flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


class Procs:
    """Started process groups, stopped in reverse order on exit."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._old: dict[int, object] = {}

    def __enter__(self) -> Procs:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, _interrupt)
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop_all()
        for sig, old in self._old.items():
            signal.signal(sig, old)  # type: ignore[arg-type]

    def start(self, name: str, argv: Sequence[str], env: dict[str, str],
              cwd: str | None = None, stdin: int | None = None,
              stdout_pipe: bool = False) -> subprocess.Popen[bytes]:
        log = (self.logs / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            list(argv), env=env, cwd=cwd, stdin=stdin,
            stdout=subprocess.PIPE if stdout_pipe else log,
            stderr=log, start_new_session=True,
        )
        log.close()  # the child holds its own descriptor
        self.started.append((name, proc))
        return proc

    def check_alive(self) -> None:
        for name, proc in self.started:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; see "
                                   f"{self.logs / (name + '.log')}")

    def stop_all(self) -> None:
        while self.started:
            _name, proc = self.started.pop()
            stop_group(proc)

    def log_text(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group we started, SIGKILL it after the grace period."""
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        proc.wait(5)
        return
    if pgid != proc.pid:  # never signal a group we did not create
        proc.terminate()
        pgid = 0
    else:
        _signal_group(pgid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(STOP_GRACE_SECONDS)
    if pgid:
        _signal_group(pgid, signal.SIGKILL)  # children that outlived their parent too
    if proc.poll() is None:
        proc.kill()
        proc.wait(5)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def wait_for(pred: Callable[[], bool], timeout: float, what: str,
             alive: Callable[[], None] | None = None) -> None:
    """Poll ``pred`` until true; a deadline and a dead process end the wait with an error."""
    deadline = time.monotonic() + timeout
    while not pred():
        if alive is not None:
            alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(POLL_SECONDS)


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


class LineReader:
    """A child's stdout, one line at a time, each read with a deadline (a reader thread)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.lines: queue.Queue[bytes] = queue.Queue(maxsize=1000)
        self._thread = threading.Thread(target=self._pump, args=(proc.stdout,), daemon=True)
        self._thread.start()

    def _pump(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines.put(line)
        self.lines.put(b"")  # end of file

    def read(self, timeout: float) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no line from the child within {timeout:.0f} s") from None
        if not line:
            raise RuntimeError("the child closed its stdout (exited?)")
        return line.decode().strip()
