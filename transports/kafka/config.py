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
                       latency there is about half this value: use 5-20 with it,
                       at the cost of 1000/value idle fetches a second
                       (docs/kafka-transport.md)
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

import os
from dataclasses import dataclass, field
from typing import Annotated, Literal
from urllib.parse import parse_qs, unquote, urlsplit

from partition_notify.transports.hosts import parse_hosts
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic import ValidationError as PydanticValidationError

from partition_notify.core.errors import ConfigurationError
from partition_notify.core.limits import CONNECT_TIMEOUT_SECONDS

DEFAULT_PORT = 9092
SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


def _upper(value: object) -> object:
    return value.upper() if isinstance(value, str) else value


def _lower(value: object) -> object:
    return value.lower() if isinstance(value, str) else value


def _blank_is_unset(value: object) -> object:
    return None if value == "" else value


Blankable = BeforeValidator(_blank_is_unset)


class KafkaOptions(BaseModel):
    """The ``?option=value`` part of a ``kafka://`` URL (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    api_version: Annotated[tuple[int, ...] | None, Blankable] = None
    group_id: Annotated[str | None, Blankable] = None
    session_timeout_ms: Annotated[Annotated[int, Field(ge=1)] | None, Blankable] = None
    fetch_max_wait_ms: int = Field(500, ge=0)
    auto_offset_reset: Annotated[Literal["latest", "earliest"], BeforeValidator(_lower)] = "latest"
    create_topics: bool = True
    partitions: int = Field(1, ge=1)
    replication_factor: int = Field(-1, ge=-1)
    #: None: SASL_PLAINTEXT when a username is given, else PLAINTEXT.
    security_protocol: Annotated[SecurityProtocol | None, BeforeValidator(_upper)] = None
    sasl_mechanism: Annotated[SaslMechanism, BeforeValidator(_upper)] = "PLAIN"
    ssl_cafile: Annotated[str | None, Blankable] = None

    @field_validator("api_version", mode="before")
    @classmethod
    def _version(cls, value: object) -> object:
        if not isinstance(value, str) or value.lower() in ("", "auto"):
            return None if isinstance(value, str) else value
        try:
            version = tuple(int(p) for p in value.split("."))
        except ValueError:
            version = ()
        if not 2 <= len(version) <= 3:
            raise ValueError("'auto' or a version like 2.8 or 3.9.0")
        return version

    @field_validator("ssl_cafile")
    @classmethod
    def _cafile(cls, value: str | None) -> str | None:
        # kafka-python opens it only when a connection starts, and then reports
        # "Unable to bootstrap": after a command saved its events (exit 5).
        if value is not None:
            try:
                with open(value, "rb"):
                    pass
            except OSError as exc:
                raise ValueError(f"a CA bundle file this process (uid {os.geteuid()}) can "
                                 f"read; it is not readable: {exc.strerror}") from None
        return value

    @field_validator("replication_factor")
    @classmethod
    def _replication(cls, value: int) -> int:
        if value == 0:
            raise ValueError("-1 (broker default) or an integer >= 1")
        return value

    @classmethod
    def from_query(cls, query: dict[str, str]) -> KafkaOptions:
        """Validate the URL's options; errors name the option, its value and what is expected."""
        try:
            return cls.model_validate(query)
        except PydanticValidationError as exc:
            raise ConfigurationError(_explain(exc)) from None


def _explain(exc: PydanticValidationError) -> str:
    errors = exc.errors(include_url=False)
    unknown = sorted(str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden")
    if unknown:
        return (f"Kafka URL: unknown option(s) {unknown}; known: "
                f"{', '.join(sorted(KafkaOptions.model_fields))}")
    first = errors[0]
    name, value, ctx = first["loc"][0], first["input"], first.get("ctx", {})
    expected = {
        "int_parsing": "an integer",
        "bool_parsing": "true or false",
        "greater_than_equal": f"an integer >= {ctx.get('ge')}",
        "value_error": str(ctx.get("error", "")).removeprefix("Value error, "),
    }.get(first["type"], first["msg"].removeprefix("Input should be "))
    if first["type"] == "literal_error":
        expected = "one of " + str(ctx.get("expected", "")).replace("'", "").replace(" or ", ", ")
    return f"Kafka URL option {name}={value!r}: expected {expected}"


@dataclass(frozen=True)
class KafkaEndpoint:
    """Everything needed to build kafka-python clients for one cluster."""

    bootstrap: tuple[str, ...]
    client_id: str = "partition-notify"
    connect_timeout: float = CONNECT_TIMEOUT_SECONDS
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

    def client_config(self) -> dict[str, object]:
        """Keyword arguments every kafka-python client (producer, consumer, admin) accepts."""
        timeout_ms = int(self.connect_timeout * 1000)
        config: dict[str, object] = {
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
              connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
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
    options = KafkaOptions.from_query(query)
    if connect_timeout <= 0:
        raise ConfigurationError(f"Kafka: connect_timeout must be > 0, got {connect_timeout}")
    user = username or unquote(url_user) or None
    secret = password or unquote(url_password) or None
    protocol = options.security_protocol or ("SASL_PLAINTEXT" if user else "PLAINTEXT")
    if protocol.startswith("SASL") and not (user and secret):
        raise ConfigurationError(f"Kafka security_protocol {protocol} needs a username and "
                                 "password (PN_BROKER_USERNAME / PN_BROKER_PASSWORD)")
    return KafkaEndpoint(
        bootstrap=bootstrap,
        client_id=client_id or "partition-notify",
        connect_timeout=float(connect_timeout),
        **options.model_dump(exclude={"security_protocol"}),
        security_protocol=protocol,
        username=user,
        password=secret,
    )
