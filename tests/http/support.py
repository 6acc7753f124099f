"""A real ``partition-notify serve`` with the HTTP API, for tests and the bench."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.faults.support import ROOT, free_port, wait_until


@dataclass
class HttpServe:
    store_url: str
    log: Path
    env_extra: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> HttpServe:
        self.port = free_port()
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PN_STORE_URL": self.store_url,
            "PN_TRANSPORT_URL": "embedded://",
            "PN_HTTP_BIND": f"127.0.0.1:{self.port}",
            "PN_RELAY_INTERVAL_SECONDS": "0.5",
            **self.env_extra,
        }
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "partition_notify.cli", "serve"],
                cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
            )
        wait_until(self._ready, timeout, f"serve to answer /readyz on {self.base}", 0.1)
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"serve exited {self.proc.returncode}: {self.text()[-3000:]}")
        try:
            return httpx.get(self.base + "/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError(f"serve did not stop within {timeout:g} s") from None
        return int(self.proc.returncode)

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def unique_db() -> str:
    return f"h{uuid.uuid4().hex[:10]}"
