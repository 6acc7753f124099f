"""``partition-notify tail --history`` when the history is not merged within the
subscriber's timeout (PN_CONNECT_TIMEOUT_SECONDS): :class:`HistoryTimeout` leaves the
subscription open, so tail says so on stderr and still prints every history message,
then the live ones, each once, in order.

The merge is slowed for real: a history of thousands of set-dones against a timeout
of a tenth of a millisecond (the dispatcher cannot merge them that fast). Real SQLite
and PostgreSQL stores, embedded transport, the CLI in its own process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from partition_notify import build_app

CLI = str(Path(sys.executable).with_name("partition-notify"))
HISTORY = 6000
LIVE = 3
LATE = {"PN_CONNECT_TIMEOUT_SECONDS": "0.0001"}


@pytest.fixture
def history(store_url: str) -> list[str]:
    with build_app(store_url=store_url) as app:
        app.publisher.register_table("db", "t", ["ds"])
        specs = [f"ds=d{i:05}" for i in range(HISTORY)]
        for s in specs:
            app.publisher.send_mark_set_done("db", "t", s)
    return specs


def _specs(out: str) -> list[str]:
    return ["ds=" + json.loads(line)["partitionSpec"]["ds"] for line in out.splitlines()]


def _says_late(line: str) -> None:
    assert line.startswith("partition-notify tail: history of topic "), line
    assert "not merged within 0.0001 s (PN_CONNECT_TIMEOUT_SECONDS)" in line, line
    assert "exc.subscription" not in line, f"a Python name means nothing here: {line}"
    assert "still printed, history first, then live messages" in line, line


def test_tail_prints_a_late_history_then_live_each_once_in_order(
        store_url: str, history: list[str]) -> None:
    proc = subprocess.Popen(
        [CLI, "--store-url", store_url, "tail", "db.t", "--history",
         "--count", str(HISTORY + LIVE), "--timeout", "120"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **LATE})
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # the event: the history was late, tail goes on
        _says_late(first)
        live = [f"ds=live{i}" for i in range(LIVE)]
        with build_app(store_url=store_url) as app:
            for s in live:
                app.publisher.send_mark_set_done("db", "t", s)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, (first, err)
    assert err == "", err
    got = _specs(out)
    assert got == history + live, (len(got), got[:3], got[-5:])


def test_tail_timeout_zero_still_prints_the_whole_late_history(
        store_url: str, history: list[str]) -> None:
    # --timeout 0 is "what is already there, then stop": a late merge is no reason
    # to stop before the history the store already holds is printed.
    proc = subprocess.run(
        [CLI, "--store-url", store_url, "tail", "db.t", "--history", "--timeout", "0"],
        capture_output=True, text=True, env={**os.environ, **LATE}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr.splitlines()
    assert len(err) == 1, err
    _says_late(err[0])
    got = _specs(proc.stdout)
    assert got == history, (len(got), got[:3], got[-3:])
