"""An idle ``serve`` is quiet: one line per thing that happened, not per job run.

The real CLI runs a bounded number of relay runs (tests/serve/_idle_serve.py)
every 20 ms, so APScheduler's per-run INFO lines would show as hundreds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.accounts import ROOT

RUNS = 100


def idle_serve(tmp_path: Path, **settings: str) -> list[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PN_STORE_URL": f"sqlite:///{tmp_path}/store.db",
        "PN_TRANSPORT_URL": "embedded://",
        "PN_RELAY_INTERVAL_SECONDS": "0.02",
        **{f"PN_{k.upper()}": v for k, v in settings.items()},
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.serve._idle_serve", str(RUNS)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr.splitlines()


def test_idle_serve_logs_startup_and_stop_only(tmp_path: Path) -> None:
    lines = idle_serve(tmp_path)
    # serving, signal, stopping, stopped: nothing per job run.
    assert len(lines) <= 6, "\n".join(lines[:20])
    assert not any("apscheduler" in line for line in lines), lines[:5]


def test_log_level_debug_shows_the_job_runs(tmp_path: Path) -> None:
    lines = idle_serve(tmp_path, log_level="DEBUG")
    assert sum("executed successfully" in line for line in lines) >= RUNS


@pytest.mark.parametrize("level", ["WARNING", "warning"])
def test_log_level_warning_is_silent_when_idle(tmp_path: Path, level: str) -> None:
    assert idle_serve(tmp_path, log_level=level) == []


def test_json_log_format_is_one_object_per_line(tmp_path: Path) -> None:
    lines = idle_serve(tmp_path, log_format="json")
    records = [json.loads(line) for line in lines]
    assert records and {"ts", "level", "logger", "message"} <= set(records[0])
    assert any(r.get("pn_event") == "service.stopped" for r in records)


def test_bad_log_level_is_one_line_naming_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "partition_notify.cli", "serve"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PN_LOG_LEVEL": "LOUD",
             "PN_STORE_URL": f"sqlite:///{tmp_path}/s.db"},
    )
    assert done.returncode in (1, 2)
    assert "PN_LOG_LEVEL" in done.stderr and "LOUD" in done.stderr, done.stderr
