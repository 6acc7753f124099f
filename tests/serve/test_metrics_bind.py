"""``PN_METRICS_PORT`` on a busy port is one stderr line and exit 1, not a
traceback; ``PN_METRICS_BIND`` chooses the address (issue 24). Real ``serve``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import httpx

from tests.support.accounts import ROOT
from tests.support.net import free_port, wait_until


def _serve(store_url: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "partition_notify.cli", "serve"], cwd=ROOT, text=True,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("PN_")},
             "PYTHONPATH": str(ROOT), "PN_STORE_URL": store_url,
             "PN_TRANSPORT_URL": "embedded://", **env},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_busy_metrics_port_is_one_line_and_exit_1(sqlite_url: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = _serve(sqlite_url, PN_METRICS_PORT=str(port), PN_LOG_LEVEL="WARNING")
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"PN_METRICS_PORT={port} on PN_METRICS_BIND='127.0.0.1'" in lines[0], lines
    assert "in use" in lines[0], lines


def test_metrics_bind_chooses_the_address(sqlite_url: str) -> None:
    port = free_port()
    proc = _serve(sqlite_url, PN_METRICS_PORT=str(port), PN_METRICS_BIND="127.0.0.2")

    def answers() -> bool:
        assert proc.poll() is None, proc.communicate(timeout=10)
        try:
            return httpx.get(f"http://127.0.0.2:{port}/healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(answers, 60, "serve's metrics endpoint on 127.0.0.2")
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            raise AssertionError("the metrics endpoint also listens on 127.0.0.1")
        except httpx.ConnectError:
            pass
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
