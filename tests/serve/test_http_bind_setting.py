"""A malformed ``PN_HTTP_BIND`` is a bad setting like a malformed ``PN_METRICS_PORT``: one
line naming it and its value, exit 1, from every command, also ``serve --once`` (which
starts no HTTP server and used to exit 0, so a config check with it passed a bind that
``serve`` then refused). Real processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.serve.helpers import ROOT


def _cli(store_url: str, bind: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PN_")},
           "PYTHONPATH": str(ROOT), "PN_STORE_URL": store_url,
           "PN_TRANSPORT_URL": "embedded://", "PN_HTTP_BIND": bind}
    return subprocess.run([sys.executable, "-m", "partition_notify.cli", *args], cwd=ROOT,
                          env=env, text=True, capture_output=True, timeout=120)


@pytest.mark.parametrize("bind", ["8080", "127.0.0.1:99999", "127.0.0.1:http", ":8080"])
def test_serve_once_refuses_a_malformed_bind(sqlite_url: str, bind: str) -> None:
    done = _cli(sqlite_url, bind, "serve", "--once")
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"PN_HTTP_BIND={bind!r}" in lines[0], lines
    assert "expected host:port" in lines[0], lines


def test_a_good_bind_is_accepted(sqlite_url: str) -> None:
    register = _cli(sqlite_url, "[::1]:0", "register", "s.t", "--keys", "ds")
    assert register.returncode == 0, register.stderr
    once = _cli(sqlite_url, "127.0.0.1:0", "serve", "--once")
    assert once.returncode == 0, once.stderr
