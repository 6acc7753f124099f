"""A lease on a staging directory: a lock file whose modification time says its owner lives.

The writer creates the lock before Spark starts and touches it every quarter
lease while it works, so a lock older than the lease belongs to a dead
driver and recovery may take the write over. Taking over renames the stale
lock away first; a rename succeeds for one process only, so two recoverers
never both proceed. (Lease ages compare the driver clock with the
filesystem's modification times: keep clocks within a small part of a lease.)
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time

from partition_notify.writers.hadoop import HadoopFs

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class Lease:
    def __init__(self, fs: HadoopFs, path: str, seconds: float) -> None:
        self.fs = fs
        self.path = path
        self.seconds = seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def _owner() -> bytes:
        return json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                           "at": time.time()}).encode()

    @classmethod
    def create(cls, fs: HadoopFs, path: str, seconds: float) -> Lease:
        """A fresh write's lease; its directory is new, so the lock cannot exist."""
        if not fs.create(path, cls._owner(), exclusive=True):
            raise OSError(f"lock {path} exists already")
        return cls(fs, path, seconds).start()

    @classmethod
    def claim(cls, fs: HadoopFs, path: str, seconds: float, *,
              stale_after: float) -> Lease | None:
        """Take over a write not renewed for ``stale_after`` s; None if alive or taken."""
        mtime = fs.mtime_ms(path)
        if mtime is not None:
            if _now_ms() - mtime < stale_after * 1000:
                return None
            stale = f"{path}.stale-{secrets.token_hex(4)}"
            if not fs.rename(path, stale):
                return None
            fs.delete(stale, recursive=False)
        if not fs.create(path, cls._owner(), exclusive=True):
            return None
        return cls(fs, path, seconds).start()

    def start(self) -> Lease:
        self._thread = threading.Thread(target=self._renew, name="pn-lease", daemon=True)
        self._thread.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 4):
            try:
                self.fs.touch(self.path, _now_ms())
            except Exception as exc:  # keep renewing; the next touch may work
                log.warning("could not renew lease %s: %s", self.path, exc)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
