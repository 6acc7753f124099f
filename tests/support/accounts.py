"""Where the test services listen and which accounts they have.

One place for the variables ``scripts/services.sh env`` exports (and their
defaults), read by the service manager and by the tests alike. Stdlib only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_env = os.environ.get

#: The ActiveMQ installation (Debian package 'activemq'); instances get their own dir.
ACTIVEMQ_HOME = Path(_env("PN_ACTIVEMQ_HOME", "/usr/share/activemq"))
#: The shared broker's ports: those of scripts/activemq/activemq.xml.
ACTIVEMQ_STOMP_PORT = 61613
ACTIVEMQ_OPENWIRE_PORT = 61616
KAFKA_PORT = int(_env("PN_KAFKA_PORT", "9092"))
RABBIT_STOMP_PORT = int(_env("PN_RABBIT_STOMP_PORT", "61623"))
RABBIT_AMQP_PORT = 5672
POSTGRES_PORT = 5432

#: The service account: the only one allowed to write to topics hcat.> (activemq.xml).
SERVICE_USER = _env("PN_TEST_BROKER_USERNAME", "pn_service")
SERVICE_PASSWORD = _env("PN_TEST_BROKER_PASSWORD") or _env(
    "PN_TEST_ACTIVEMQ_PASSWORD", "pn-service-secret")
#: May subscribe, may not publish.
READER_USER = _env("PN_TEST_READER_USERNAME", "pn_reader")
READER_PASSWORD = _env("PN_TEST_READER_PASSWORD", "pn-reader-secret")
ADMIN_USER = _env("PN_TEST_BROKER_ADMIN_USERNAME", "admin")
ADMIN_PASSWORD = _env("PN_TEST_BROKER_ADMIN_PASSWORD", "pn-admin-secret")
RABBIT_USER = _env("PN_TEST_RABBIT_USER", "guest")
RABBIT_PASSWORD = _env("PN_TEST_RABBIT_PASSWORD", "guest")
RABBIT_READER_USER = _env("PN_TEST_RABBIT_READER_USERNAME", "pn_reader")
RABBIT_READER_PASSWORD = _env("PN_TEST_RABBIT_READER_PASSWORD", "pn-reader-secret")

POSTGRES_URL = _env("PN_TEST_POSTGRES_URL",
                    f"postgresql+psycopg://postgres@127.0.0.1:{POSTGRES_PORT}/postgres")


def broker_env(service_password: str = SERVICE_PASSWORD) -> dict[str, str]:
    """The variables activemq.xml reads its users' passwords and listen address from."""
    return {
        "PN_BROKER_PASSWORD": service_password,
        "PN_READER_PASSWORD": READER_PASSWORD,
        "PN_BROKER_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "PN_ACTIVEMQ_BIND": "127.0.0.1",
    }


@dataclass(frozen=True)
class BusSpec:
    """A transport the suite can run against: its URL and the account to use."""

    name: str
    url: str
    username: str | None = None
    password: str | None = None


def bus_specs() -> dict[str, BusSpec]:
    """Every transport of the contract suite, as ``scripts/services.sh env`` sets them."""
    return {
        "embedded": BusSpec("embedded", "embedded://"),
        "activemq": BusSpec(
            "activemq", _env("PN_TEST_STOMP_URL", f"stomp://127.0.0.1:{ACTIVEMQ_STOMP_PORT}"),
            SERVICE_USER, SERVICE_PASSWORD),
        "rabbitmq": BusSpec(
            "rabbitmq",
            _env("PN_TEST_RABBIT_STOMP_URL", f"stomp://127.0.0.1:{RABBIT_STOMP_PORT}"),
            RABBIT_USER, RABBIT_PASSWORD),
        "kafka": BusSpec("kafka", _env("PN_TEST_KAFKA_URL", f"kafka://127.0.0.1:{KAFKA_PORT}")),
    }
