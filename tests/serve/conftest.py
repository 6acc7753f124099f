"""Service tests use the shared ActiveMQ (``activemq_url``, root conftest); they never stop it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serve.helpers import ServeProcess, Spawn
from tests.support.accounts import ROOT, SERVICE_PASSWORD, SERVICE_USER


@pytest.fixture
def db_name() -> str:
    return f"s{uuid.uuid4().hex[:10]}"


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
            "PYTHONFAULTHANDLER": "1",  # ServeProcess.exit_code: the stacks of a hung stop
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
