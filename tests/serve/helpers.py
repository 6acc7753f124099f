"""Helpers of the relay/serve tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

from partition_notify.core.errors import PublishError
from tests.support.accounts import ROOT
from tests.support.net import wait_until


def log_unpublished(app: object, db: str, specs: list[str], chunk: int = 50) -> None:
    """Commit entries whose publish fails: the writer's broker URL is a closed port."""
    for i in range(0, len(specs), chunk):
        try:
            app.publisher.announce_partitions(db, "events", specs[i:i + chunk])  # type: ignore[attr-defined]
        except PublishError:
            continue
        raise AssertionError("publishing to a closed port succeeded")


def backdate(store_url: str, seconds: float) -> None:
    """Age the pending entries, as if their writers had died ``seconds`` ago.

    The relay leaves entries younger than its writer grace (publish timeout +
    5 s) alone; tests about the relay itself skip that wait this way.
    """
    engine = create_engine(store_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE pn_events SET created_at = created_at - :s "
                              "WHERE published_at IS NULL"), {"s": seconds})
    finally:
        engine.dispose()


def leases(store_url: str) -> dict[str | None, int]:
    """Unpublished entries per lease owner."""
    engine = create_engine(store_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT lease_owner, count(*) FROM pn_events WHERE published_at IS NULL "
                "GROUP BY lease_owner"))
            return {r[0]: int(r[1]) for r in rows}
    finally:
        engine.dispose()


Spawn = Callable[..., "ServeProcess"]


class ServeProcess:
    """``partition-notify serve`` in a process of its own, output in a log file."""

    def __init__(self, log: Path, env: dict[str, str], once: bool = False) -> None:
        self.log = log
        with open(log, "wb") as fh:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "partition_notify.cli", "serve",
                 *(["--once"] if once else [])],
                cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def exit_code(self, timeout: float) -> int:
        """Its exit code once it stops; not stopped within ``timeout``: every thread's stack.

        The fixture starts serve with ``PYTHONFAULTHANDLER``: SIGABRT makes it write each
        thread's traceback to its log before it dies, so a hung stop says where it hangs."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)
            self.proc.wait(timeout)
            raise AssertionError(f"serve did not stop within {timeout} s; its log and threads:\n"
                                 + self.text()[-8000:]) from None


def serve_with_metrics(store_url: str, port: int, **env: str) -> subprocess.Popen[str]:
    """``serve`` on the embedded transport with its metrics on ``port``; no PN_ setting of
    this process's leaks in. Output piped: ``communicate`` collects it."""
    return subprocess.Popen(
        [sys.executable, "-m", "partition_notify.cli", "serve"], cwd=ROOT, text=True,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("PN_")},
             "PYTHONPATH": str(ROOT), "PN_STORE_URL": store_url,
             "PN_TRANSPORT_URL": "embedded://", "PN_METRICS_PORT": str(port), **env},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_healthy(proc: subprocess.Popen[str], url: str, timeout: float = 60) -> None:
    """Until ``url`` (a ``/healthz``) answers 200; fails at once if ``serve`` exited."""
    def answers() -> bool:
        assert proc.poll() is None, proc.communicate(timeout=10)
        try:
            return httpx.get(url, timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(answers, timeout, f"serve healthy at {url}")
