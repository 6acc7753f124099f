"""Service tests use the shared ActiveMQ from scripts/services.sh (they never stop it)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import require
from tests.faults.support import ROOT, SERVICE_PASSWORD, SERVICE_USER, stomp_probe

STOMP_URL = os.environ.get("PN_TEST_STOMP_URL", "stomp://127.0.0.1:61613")


@pytest.fixture
def activemq_url() -> str:
    port = int(STOMP_URL.rsplit(":", 1)[1])
    require(stomp_probe(port, SERVICE_USER, SERVICE_PASSWORD) == "CONNECTED",
            f"ActiveMQ at {STOMP_URL} does not accept {SERVICE_USER} (scripts/services.sh up)")
    return STOMP_URL


@pytest.fixture
def db_name() -> str:
    return f"s{uuid.uuid4().hex[:10]}"


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


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Spawn]:
    """Start serve processes; any still running at the end is killed (by its pid)."""
    started: list[ServeProcess] = []

    def spawn(store_url: str, transport_url: str, once: bool = False,
              **settings: str) -> ServeProcess:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PN_STORE_URL": store_url,
            "PN_TRANSPORT_URL": transport_url,
            "PN_BROKER_USERNAME": SERVICE_USER,
            "PN_BROKER_PASSWORD": SERVICE_PASSWORD,
            "PN_RELAY_INTERVAL_SECONDS": "0.1",
            **{f"PN_{k.upper()}": v for k, v in settings.items()},
        }
        p = ServeProcess(tmp_path / f"serve{len(started)}.log", env, once)
        started.append(p)
        return p

    yield spawn
    for p in started:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait(30)
