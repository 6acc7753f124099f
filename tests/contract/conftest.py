"""Fixtures for the transport contract: one suite, every transport.

Broker addresses come from ``scripts/services.sh env``; a broker that does not
answer skips the test on a laptop and fails it in CI.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest

from tests.conftest import require


@dataclass(frozen=True)
class BusSpec:
    name: str
    url: str
    username: str | None = None
    password: str | None = None


def bus_specs() -> dict[str, BusSpec]:
    env = os.environ.get
    return {
        "embedded": BusSpec("embedded", "embedded://"),
        "activemq": BusSpec(
            "activemq",
            env("PN_TEST_STOMP_URL", "stomp://127.0.0.1:61613"),
            env("PN_TEST_ACTIVEMQ_USER", "pn_service"),
            env("PN_TEST_ACTIVEMQ_PASSWORD", "pn-service-secret"),
        ),
        "rabbitmq": BusSpec(
            "rabbitmq",
            env("PN_TEST_RABBIT_STOMP_URL", "stomp://127.0.0.1:61623"),
            env("PN_TEST_RABBIT_USER", "guest"),
            env("PN_TEST_RABBIT_PASSWORD", "guest"),
        ),
        "kafka": BusSpec("kafka", env("PN_TEST_KAFKA_URL", "kafka://127.0.0.1:9092")),
    }


def reachable(url: str, timeout: float = 2.0) -> bool:
    parts = urlsplit(url)
    if not parts.hostname or not parts.port:
        return True
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout):
            return True
    except OSError:
        return False


@pytest.fixture(params=list(bus_specs()))
def bus_spec(request: pytest.FixtureRequest) -> BusSpec:
    spec = bus_specs()[request.param]
    require(reachable(spec.url), f"{spec.name} broker at {spec.url} is not reachable")
    return spec


@pytest.fixture
def bus(bus_spec: BusSpec, sqlite_url: str) -> Iterator[object]:
    """An app whose publisher and subscribers use the parametrised transport."""
    from pydantic import SecretStr

    from partition_notify.app import build_app

    app = build_app(
        store_url=sqlite_url,
        transport_url=bus_spec.url,
        broker_username=bus_spec.username,
        broker_password=SecretStr(bus_spec.password) if bus_spec.password else None,
        connect_timeout_seconds=10.0,
        publish_timeout_seconds=10.0,
    )
    yield app
    app.close()


@pytest.fixture
def unique_db() -> str:
    """A database name no other test uses, so broker topics never collide."""
    return f"t{uuid.uuid4().hex[:12]}"
