"""``kafka://`` URLs: bootstrap hosts, security, and the few options the transport has.

``kafka://[user:password@]host:9092[,host2:9092][?option=value&...]``

=====================  ==========================================================
option                 meaning (default)
=====================  ==========================================================
api_version            broker protocol version, e.g. ``2.8`` (``auto``: negotiate
                       with ApiVersions, right for Apache Kafka)
group_id               consume as this consumer group: durable committed offsets
                       (none: assign every partition, start at the end offset)
session_timeout_ms     consumer-group session timeout (kafka-python's default)
fetch_max_wait_ms      longest a fetch waits at the broker for new records (500).
                       Apache Kafka answers a waiting fetch as soon as a record
                       arrives; tansu 0.6 waits the full time, so the delivery
                       latency there is about half this value: use 10-20 with it
auto_offset_reset      where a *new* consumer group starts: ``latest``/``earliest``
                       (``latest``; history comes from the store either way)
create_topics          create missing topics with the admin client (``true``)
partitions             partitions of topics the transport creates (``1``)
replication_factor     replication of topics it creates (``-1``: broker default)
security_protocol      PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL (PLAINTEXT, or
                       SASL_PLAINTEXT when a username is given)
sasl_mechanism         PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (PLAIN)
ssl_cafile             CA bundle for SSL / SASL_SSL
=====================  ==========================================================

Credentials come from settings (``PN_BROKER_USERNAME``/``PN_BROKER_PASSWORD``)
or the URL's userinfo; they are kept out of ``repr`` and never logged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from partition_notify.errors import ConfigurationError
from transports.hosts import parse_hosts

DEFAULT_PORT = 9092
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
OFFSET_RESETS = ("latest", "earliest")
KNOWN_OPTIONS = frozenset({
    "api_version", "group_id", "session_timeout_ms", "fetch_max_wait_ms", "auto_offset_reset",
    "create_topics",
    "partitions", "replication_factor", "security_protocol", "sasl_mechanism", "ssl_cafile",
})


@dataclass(frozen=True)
class KafkaEndpoint:
    """Everything needed to build kafka-python clients for one cluster."""

    bootstrap: tuple[str, ...]
    client_id: str = "partition-notify"
    connect_timeout: float = 10.0
    api_version: tuple[int, ...] | None = None
    group_id: str | None = None
    session_timeout_ms: int | None = None
    fetch_max_wait_ms: int = 500
    auto_offset_reset: str = "latest"
    create_topics: bool = True
    partitions: int = 1
    replication_factor: int = -1
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    ssl_cafile: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def client_config(self) -> dict[str, Any]:
        """Keyword arguments every kafka-python client (producer, consumer, admin) accepts."""
        timeout_ms = int(self.connect_timeout * 1000)
        config: dict[str, Any] = {
            "bootstrap_servers": list(self.bootstrap),
            "client_id": self.client_id,
            "security_protocol": self.security_protocol,
            "request_timeout_ms": max(timeout_ms, 1000),
        }
        if self.api_version is not None:
            config["api_version"] = self.api_version
        if self.security_protocol.startswith("SASL"):
            config.update(sasl_mechanism=self.sasl_mechanism,
                          sasl_plain_username=self.username,
                          sasl_plain_password=self.password)
        if self.ssl_cafile:
            config["ssl_cafile"] = self.ssl_cafile
        return config


def parse_url(url: str, *, username: str | None = None, password: str | None = None,
              connect_timeout: float = 10.0,
              client_id: str = "partition-notify") -> KafkaEndpoint:
    """A :class:`KafkaEndpoint` from a ``kafka://`` URL; explicit credentials win over the URL's."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "kafka":
        raise ConfigurationError(f"Kafka URL must start with kafka://, got scheme "
                                 f"{parts.scheme!r}")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    url_user, _, url_password = userinfo.partition(":")
    hosts = parse_hosts(hostlist, default_port=DEFAULT_PORT, kind="Kafka",
                        example=f"kafka://host:{DEFAULT_PORT}")
    bootstrap = tuple(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in hosts)
    query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    unknown = set(query) - KNOWN_OPTIONS
    if unknown:
        raise ConfigurationError(f"Kafka URL: unknown option(s) {sorted(unknown)}; known: "
                                 f"{', '.join(sorted(KNOWN_OPTIONS))}")
    if connect_timeout <= 0:
        raise ConfigurationError(f"Kafka: connect_timeout must be > 0, got {connect_timeout}")
    user = username or unquote(url_user) or None
    secret = password or unquote(url_password) or None
    protocol = query.get("security_protocol", "SASL_PLAINTEXT" if user else "PLAINTEXT").upper()
    _choice("security_protocol", protocol, SECURITY_PROTOCOLS)
    if protocol.startswith("SASL") and not (user and secret):
        raise ConfigurationError(f"Kafka security_protocol {protocol} needs a username and "
                                 "password (PN_BROKER_USERNAME / PN_BROKER_PASSWORD)")
    mechanism = query.get("sasl_mechanism", "PLAIN").upper()
    _choice("sasl_mechanism", mechanism, SASL_MECHANISMS)
    reset = query.get("auto_offset_reset", "latest").lower()
    _choice("auto_offset_reset", reset, OFFSET_RESETS)
    session = query.get("session_timeout_ms")
    return KafkaEndpoint(
        bootstrap=bootstrap,
        client_id=client_id or "partition-notify",
        connect_timeout=float(connect_timeout),
        api_version=_api_version(query.get("api_version", "auto")),
        group_id=query.get("group_id") or None,
        session_timeout_ms=_int("session_timeout_ms", session, 1) if session else None,
        fetch_max_wait_ms=_int("fetch_max_wait_ms", query.get("fetch_max_wait_ms", "500"), 0),
        auto_offset_reset=reset,
        create_topics=_bool("create_topics", query.get("create_topics", "true")),
        partitions=_int("partitions", query.get("partitions", "1"), 1),
        replication_factor=_replication(query.get("replication_factor", "-1")),
        security_protocol=protocol,
        sasl_mechanism=mechanism,
        ssl_cafile=query.get("ssl_cafile") or None,
        username=user,
        password=secret,
    )


def _api_version(text: str) -> tuple[int, ...] | None:
    if text.lower() in ("", "auto"):
        return None
    try:
        version = tuple(int(p) for p in text.split("."))
    except ValueError:
        version = ()
    if not 2 <= len(version) <= 3:
        raise ConfigurationError(f"Kafka api_version {text!r}: expected 'auto' or a version "
                                 "like 2.8 or 3.9.0")
    return version


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigurationError(f"Kafka {name} {value!r}: expected one of {', '.join(allowed)}")


def _bool(name: str, text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"Kafka {name} {text!r}: expected true or false")


def _int(name: str, text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ConfigurationError(f"Kafka {name} {text!r}: expected an integer") from None
    if value < minimum:
        raise ConfigurationError(f"Kafka {name} must be >= {minimum}, got {value}")
    return value


def _replication(text: str) -> int:
    value = _int("replication_factor", text, -1)
    if value == 0:
        raise ConfigurationError("Kafka replication_factor must be -1 (broker default) or >= 1")
    return value
