"""Fixtures for the transport contract: one suite, every transport.

Broker addresses come from ``scripts/services.sh env`` (tests/support/accounts.py);
a broker that does not answer skips the test on a laptop and fails it in CI.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.accounts import BusSpec, bus_specs
from tests.support.ci import require
from tests.support.markers import uses
from tests.support.net import reachable


@pytest.fixture(params=list(bus_specs()))
@uses("broker", when=lambda name: name != "embedded")
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
