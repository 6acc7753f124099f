"""Fault tests run against a private ActiveMQ (the shipped configuration, own
ports): killing or freezing it cannot break the shared broker other suites use,
and every test that breaks it restarts it in a ``finally`` (self-healing)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require
from tests.faults.support import PrivateActiveMQ


@pytest.fixture(scope="session")
def private_activemq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateActiveMQ]:
    ok, reason = PrivateActiveMQ.available()
    require(ok, reason)
    broker = PrivateActiveMQ(Path(tmp_path_factory.mktemp("activemq")))
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def broker(private_activemq: PrivateActiveMQ) -> Iterator[PrivateActiveMQ]:
    """The private broker, running; restarted after the test if the test broke it."""
    private_activemq.thaw()
    private_activemq.start()
    yield private_activemq
    private_activemq.thaw()
    private_activemq.start()


@pytest.fixture
def db_name() -> str:
    return f"f{uuid.uuid4().hex[:10]}"
