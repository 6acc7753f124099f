"""Shared by the STOMP broker tests: which brokers, and an app wired to one."""

from __future__ import annotations

from urllib.parse import urlsplit

from tests.support.accounts import BusSpec, bus_specs
from tests.support.ci import require
from tests.support.net import reachable

STOMP_BROKERS = ("activemq", "rabbitmq")


def stomp_spec(name: str) -> BusSpec:
    """The broker's address and service account; skip on a laptop, fail in CI, if it is down."""
    spec = bus_specs()[name]
    require(reachable(spec.url), f"{name} STOMP broker at {spec.url} is not reachable")
    return spec


def host_port(spec: BusSpec) -> tuple[str, int]:
    parts = urlsplit(spec.url)
    assert parts.hostname and parts.port
    return parts.hostname, parts.port


def build(spec: BusSpec, store_url: str, *, url: str | None = None,
          username: str | None = None, password: str | None = None, **settings: object):
    from pydantic import SecretStr

    from partition_notify.app import build_app

    pw = password if password is not None else spec.password
    options: dict[str, object] = {
        "connect_timeout_seconds": 5.0, "publish_timeout_seconds": 10.0, **settings}
    return build_app(
        store_url=store_url, transport_url=url or spec.url,
        broker_username=username if username is not None else spec.username,
        broker_password=SecretStr(pw) if pw else None, **options)
