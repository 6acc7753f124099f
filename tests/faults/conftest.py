"""Fault tests run against a private ActiveMQ (the shipped configuration, own
ports): killing or freezing it cannot break the shared broker other suites use,
and every test that breaks it restarts it in a ``finally`` (self-healing)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.activemq import ActiveMQ, unavailable
from tests.support.ci import require
from tests.support.markers import uses


@pytest.fixture(scope="session")
@uses("broker")
def private_activemq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ActiveMQ]:
    reason = unavailable()
    require(reason is None, reason or "")
    broker = ActiveMQ(Path(tmp_path_factory.mktemp("activemq")))
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def broker(private_activemq: ActiveMQ) -> Iterator[ActiveMQ]:
    """The private broker, running; restarted after the test if the test broke it."""
    private_activemq.thaw()
    private_activemq.start()
    yield private_activemq
    private_activemq.thaw()
    private_activemq.start()


@pytest.fixture
def db_name() -> str:
    return f"f{uuid.uuid4().hex[:10]}"
