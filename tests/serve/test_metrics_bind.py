"""``PN_METRICS_PORT`` on a busy port is one stderr line and exit 1, not a
traceback; ``PN_METRICS_BIND`` chooses the address (issue 24). Real ``serve``."""

from __future__ import annotations

import socket

import httpx

from tests.serve.helpers import serve_with_metrics, wait_healthy
from tests.support.net import free_port


def test_busy_metrics_port_is_one_line_and_exit_1(sqlite_url: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = serve_with_metrics(sqlite_url, port, PN_LOG_LEVEL="WARNING")
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"PN_METRICS_PORT={port} on PN_METRICS_BIND='127.0.0.1'" in lines[0], lines
    assert "in use" in lines[0], lines


def test_metrics_bind_chooses_the_address(sqlite_url: str) -> None:
    port = free_port()
    proc = serve_with_metrics(sqlite_url, port, PN_METRICS_BIND="127.0.0.2")
    try:
        wait_healthy(proc, f"http://127.0.0.2:{port}/healthz")
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            raise AssertionError("the metrics endpoint also listens on 127.0.0.1")
        except httpx.ConnectError:
            pass
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
