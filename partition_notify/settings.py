"""Settings, read from ``PN_*`` environment variables (or a ``.env`` file).

Nothing here is built at import time: call :func:`load_settings` (the
composition root does) so tests and tools can pass their own values.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, SecretStr, ValidationInfo, field_validator
from pydantic import ValidationError as PydanticValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from partition_notify.contract.messages import DEFAULT_MAX_MESSAGE_BYTES, MAX_BODY_BYTES
from partition_notify.contract.topics import TopicPolicy
from partition_notify.core import limits
from partition_notify.core.errors import ConfigurationError
from partition_notify.core.limits import (
    DEFAULT_RETENTION_SECONDS,
    IDEMPOTENCY_TTL_SECONDS,
    MAX_RETENTION_SECONDS,
    RETIRED_FILE_RETENTION_SECONDS,
)
from partition_notify.settings_checks import (
    AIRFLOW_PUSH_VARIABLES,
    DefaultFs,
    HttpBind,
    SpoolDirs,
    duration,
    env_file_keys,
    printable,
    streams_leave_room,
    topic_prefix,
    unknown_lines,
)

DAY = 24 * 3600
#: Relay lease when none is set: max(RELAY_MIN_LEASE_SECONDS, 3 x publish timeout)
#: (publisher/relay.py computes it; tests/cli/test_help_defaults.py checks both agree).
RELAY_MIN_LEASE_SECONDS = 60
#: publisher/relay.py's WRITER_GRACE_MARGIN_SECONDS, for the description below.
RELAY_WRITER_GRACE_MARGIN_SECONDS = 5
#: SQLite ``PRAGMA synchronous`` levels offered (store.engine.SQLITE_SYNCHRONOUS_LEVELS);
#: OFF (no fsync at all) is not.
SQLITE_LEVELS = ("NORMAL", "FULL", "EXTRA")
SqliteSynchronous = Annotated[
    Literal["NORMAL", "FULL", "EXTRA"],
    # Case-insensitive, but an invalid value is echoed as given.
    BeforeValidator(
        lambda v: v.upper() if isinstance(v, str) and v.upper() in SQLITE_LEVELS else v
    ),
]
#: ``PN_LOG_LEVEL`` values, case-insensitive.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LogLevel = Annotated[
    Literal["DEBUG", "INFO", "WARNING", "ERROR"],
    BeforeValidator(lambda v: v.upper() if isinstance(v, str) and v.upper() in LOG_LEVELS else v),
]
#: ``PN_FOREIGN_MESSAGES`` values, case-insensitive (subscriber/verify.py).
FOREIGN_MODES = ("verify", "deliver")
ForeignMessages = Annotated[
    Literal["verify", "deliver"],
    BeforeValidator(lambda v: v.lower() if isinstance(v, str) and v.lower() in FOREIGN_MODES
                    else v),
]
log = logging.getLogger(__name__)
#: Refusals for good before the relay dead-letters an event.
DEFAULT_MAX_ATTEMPTS = 5
#: serve's HTTP connections when PN_HTTP_MAX_CONNECTIONS is unset: well under the
#: usual file-descriptor limits, far above a deployment's drivers and consumers.
DEFAULT_HTTP_MAX_CONNECTIONS = 1024
#: Without PN_HTTP_MAX_STREAMS, streams and long-polls get at most this share of
#: the connections: the rest stays for writes (a Spark driver's commit), reads, health.
STREAM_SHARE = 0.75


class Settings(BaseSettings):
    # No NaN or infinity: a deadline or interval of either never comes (or overflows a timer).
    model_config = SettingsConfigDict(env_prefix="PN_", env_file=".env", extra="ignore",
                                      allow_inf_nan=False)

    store_url: str = Field(
        "sqlite:///./partition-notify.db",
        description="SQLAlchemy URL of the store: sqlite:///path or postgresql+psycopg://... "
        "(the default is relative to the working directory; read commands never create a "
        "store, tables and serve name the one in use)")
    transport_url: str = Field(
        "embedded://",
        description="embedded:// (the store is the bus), stomp://host:61613, kafka://host:9092")
    broker_username: str | None = Field(None, description="broker login (STOMP) or SASL/PLAIN "
                                        "user (Kafka)")
    broker_password: SecretStr | None = Field(None, description="secret, never logged")

    server_name: str = Field("partition-notify", description="'server' field of messages")
    service_principal: str = Field("", description="'servicePrincipal' field of messages "
                                   "(Kerberos principal of the publisher)")
    topic_prefix: str = Field("hcat", description="first part of every topic name: letters, "
                              "digits, '_' and '-', parts joined by single dots")
    topic_policy: TopicPolicy = Field(TopicPolicy.PER_TABLE,
                                      description="per-table, per-database or single")
    default_retention_seconds: int = Field(
        DEFAULT_RETENTION_SECONDS, gt=0, le=MAX_RETENTION_SECONDS,
        description="how long set-done is kept; per table with register --retention-seconds")

    connect_timeout_seconds: float = Field(limits.CONNECT_TIMEOUT_SECONDS, gt=0, description=(
        "deadline to connect (broker, store: 3x as SQLite busy / lock timeout)"))
    store_reply_timeout_seconds: float = Field(
        limits.STORE_REPLY_TIMEOUT_SECONDS, gt=0, description="PostgreSQL store: deadline "
        "for a statement's reply; past it the connection is closed (not for migrations)")
    publish_timeout_seconds: float = Field(10.0, gt=0,
                                           description="deadline for the broker's confirmation")
    close_timeout_seconds: float = Field(5.0, gt=0, description="deadline to close (and write "
                                         "pending published marks, also at interpreter exit)")
    heartbeat_ms: int = Field(5000, ge=0, description="STOMP heart-beat interval")
    poll_interval_seconds: float = Field(
        0.02, gt=0,
        description="embedded transport and log followers: how often they read the log "
        "without cross-process wake-ups (with them: a fallback, at least 1 s)")
    cross_process_wakeups: bool = Field(
        True,
        description="wake log readers on other processes' commits (PostgreSQL LISTEN/NOTIFY, "
        "SQLite inotify on the WAL and on `<db>-pn-commit`, which appends touch once "
        "committed); PgBouncer transaction mode: readers poll, one warning (false: none)")

    purge_interval_seconds: float = Field(
        60.0, gt=0, description="serve: how often retention and housekeeping purges run")
    dataset_expiry_interval_seconds: float = Field(
        3600.0, gt=0,
        description="serve: remove SNAPSHOT-dataset versions retention lets go, this often "
        "(local paths; hdfs:// or s3a:// need `dataset expire --spark`)")
    purge_batch_size: int = Field(5000, gt=0, description="rows per purge batch (SQLite: at "
                                  "most 2,500 with a 5 ms pause, so writers get the lock)")
    # Housekeeping (docs/reliability.md#retention), at PN_PURGE_INTERVAL_SECONDS.
    event_log_retention_seconds: int = Field(
        30 * DAY, gt=0, le=MAX_RETENTION_SECONDS,
        description="serve: keep published events this long at least (never less than the "
        "longest table retention or the deadline look-back; unpublished events, dead "
        "letters, each topic's last event and events a cursor has not passed always stay)")
    cursor_retention_seconds: int = Field(
        90 * DAY, gt=0, le=MAX_RETENTION_SECONDS,
        description="serve: drop a consumer cursor that has not moved for this long")
    spark_commit_retention_seconds: int = Field(
        30 * DAY, gt=0, le=MAX_RETENTION_SECONDS,
        description="serve: how long a processed Spark job id is remembered (a manifest "
        "replayed later than this announces again)")
    revision_abort_retention_seconds: int = Field(30 * DAY, gt=0, le=MAX_RETENTION_SECONDS,
        description="serve: forget an aborted write transaction and its file rows this long "
        "after it ended (not while a partition carries its revision); its data files first")
    retired_file_retention_seconds: int = Field(RETIRED_FILE_RETENTION_SECONDS, gt=0,
        le=MAX_RETENTION_SECONDS, description="delete files an overwrite moved to _pn_retired/ "
        "this long after it committed (serve: local; vacuum_retired: Spark); older snapshots fail")
    expectation_check_retention_seconds: int = Field(
        90 * DAY, gt=0, le=MAX_RETENTION_SECONDS,
        description="serve: keep deadline verdicts this long (never less than the deadline "
        "look-back)")
    spool_retention_seconds: int = Field(
        7 * DAY, gt=0, le=MAX_RETENTION_SECONDS,
        description="serve: delete *.json.rejected and abandoned .*.json.tmp spool files "
        "this old")
    relay_interval_seconds: float = Field(1.0, gt=0, description="serve: how often the "
                                          "outbox relay looks for undelivered events")
    relay_batch_size: int = Field(500, gt=0, description="serve: events per relay batch")
    relay_lease_seconds: float | None = Field(
        None, gt=0, description="how long a relay owns leased entries (default "
        f"max({RELAY_MIN_LEASE_SECONDS} s, 3 x publish_timeout_seconds))")
    relay_writer_grace_seconds: float | None = Field(
        None, ge=0, description="leave entries this young to their writer (default "
        f"publish_timeout_seconds + {RELAY_WRITER_GRACE_MARGIN_SECONDS} s)")
    relay_max_backoff_seconds: float = Field(
        8.0, gt=0, description="serve: longest pause between failed relay batches")
    sqlite_synchronous: SqliteSynchronous = Field(
        "FULL", description="SQLite store: FULL fsyncs the WAL at every commit (durable at "
        "commit); NORMAL is faster but may lose the last commits on power loss")
    relay_max_attempts: int = Field(
        DEFAULT_MAX_ATTEMPTS, gt=0, description="refusals for good (too large, not "
        "authorized) before an event is dead-lettered; broker-down and timeout failures "
        "do not count")
    max_message_bytes: int = Field(
        DEFAULT_MAX_MESSAGE_BYTES, gt=0, le=MAX_BODY_BYTES, description="largest message "
        "body the publisher accepts (checked before logging); subscribers accept up to the "
        "ceiling, so nothing accepted is ever dropped")
    spark_spool_interval_seconds: float = Field(
        5.0, gt=0, description="serve: how often it looks for Spark commit manifests")
    spark_spool_scan_deadline_seconds: float = Field(
        30.0, gt=0, description="serve: longest one pick-up of Spark commit manifests runs; "
        "the rest waits for the next")
    default_fs: DefaultFs = Field(
        None, description="the filesystem scheme-less table locations are on, as Hadoop's "
        "fs.defaultFS (e.g. hdfs://nn:8020); unset: the local filesystem")
    spark_spool_dirs: SpoolDirs = Field(
        "", description="serve: extra comma-separated dirs holding Spark commit manifests")
    foreign_messages: ForeignMessages = Field(
        "verify", description="a broker message the event log does not hold (same topic, "
        "topicSeq, message id and kind): verify drops and counts it; deliver hands it on by "
        "message id (other producers share the topics on purpose)")
    log_format: Literal["text", "json"] = Field(
        "text", description="serve: text lines, or json (one object per line)")
    log_level: LogLevel = Field(
        "INFO", description="serve: INFO is one line per thing that happened; DEBUG adds "
        "every scheduler job run and migration step")
    iceberg_poll_interval_seconds: float = Field(
        5.0, gt=0, description="serve: how often it reads the commits of Iceberg tables "
        "registered with --format iceberg")
    delta_poll_interval_seconds: float = Field(
        5.0, gt=0, description="serve: how often it reads the _delta_log of Delta tables "
        "registered with --format delta")
    lakehouse_lease_seconds: float = Field(
        60.0, gt=0, description="serve: how long a follower owns an Iceberg/Delta table without "
        "renewing (every run renews); a serve that died is taken over after this")
    lakehouse_read_timeout_seconds: float = Field(
        60.0, gt=0, description="serve: longest one read of an Iceberg/Delta table's commits "
        "(pyiceberg, delta-rs) may take; past it the table is skipped until the read returns")
    metrics_port: int | None = Field(None, ge=1, le=65535,
                                     description="serve: Prometheus endpoint port (off unset)")
    metrics_bind: str = Field(
        "127.0.0.1", min_length=1,
        description="serve: address the Prometheus endpoint listens on (0.0.0.0: every "
        "interface)")
    # HTTP API and deadlines (docs/http-api.md)
    http_bind: HttpBind = Field(None, description="serve: host:port of the HTTP API (off unset)")
    http_anonymous_read: bool = Field(False, description="HTTP reads without a token")
    http_max_body_bytes: int = Field(1 << 20, gt=0, description="larger request bodies get 413")
    http_wait_max_seconds: float = Field(300.0, gt=0, description="longest HTTP long-poll")
    http_idempotency_ttl_seconds: int = Field(
        IDEMPOTENCY_TTL_SECONDS, gt=0,
        description="Idempotency-Key lifetime (HTTP, and CLI/Python idempotency keys)")
    http_stream_auth_recheck_seconds: float = Field(
        30.0, gt=0, description="an open SSE stream re-checks its token this often; "
        "a revoked token's stream is closed")
    http_shutdown_timeout_seconds: float = Field(10.0, gt=0, description="HTTP drain on stop")
    http_keepalive_seconds: int = Field(
        120, ge=1, description="serve keeps an idle HTTP connection open this long, so a "
        "Spark driver's next commit reuses it (uvicorn's default: 5)")
    # A head is a few hundred bytes any client sends at once: 10 s allows many
    # round trips on a bad link, yet a client holding the connection cap this way
    # must open it anew every 10 s. A body of PN_HTTP_MAX_BODY_BYTES (1 MiB by
    # default) arrives within 30 s at 35 KB/s or more (http/slow_clients.py).
    http_header_timeout_seconds: float = Field(
        10.0, gt=0, description="serve: a request's head (request line and headers) must "
        "arrive within this, from the connection's accept or the request's first byte; "
        "else the connection is closed")
    http_body_timeout_seconds: float = Field(
        30.0, gt=0, description="serve: a request's declared body must arrive within this "
        "from the request's start; else 408 and the connection is closed")
    http_max_connections: int = Field(
        DEFAULT_HTTP_MAX_CONNECTIONS, ge=2,
        description="serve: open HTTP connections (idle keep-alive ones too) and requests in "
        "progress; a request over it gets 503 with Retry-After")
    http_max_streams: int | None = Field(
        None, ge=1,
        description="serve: SSE streams and long-polls open at once, below "
        f"PN_HTTP_MAX_CONNECTIONS (default {STREAM_SHARE:.0%} of it); more get 503")
    deadline_check_interval_seconds: float = Field(30.0, gt=0, description="lateness re-check")
    deadline_lookback_seconds: int = Field(
        86400, gt=0, description="deadlines older than this are not checked (first start)")
    rules_interval_seconds: float = Field(
        5.0, gt=0, description="serve: how often completeness rules read the new events")

    @field_validator("*")
    @classmethod
    def _durations_in_range(cls, value: object, info: ValidationInfo) -> object:
        return duration(info.field_name or "", value)

    @field_validator("*", mode="before")
    @classmethod
    def _printable(cls, value: object) -> object:
        return printable(value)  # every text: it reaches messages, headers and logs

    @field_validator("topic_prefix")
    @classmethod
    def _topic_prefix(cls, value: str) -> str:
        return topic_prefix(value)

    @field_validator("http_max_streams")
    @classmethod
    def _streams_leave_room(cls, value: int | None, info: ValidationInfo) -> int | None:
        return streams_leave_room(value, info.data.get("http_max_connections"))

    @property
    def stream_cap(self) -> int:
        """SSE streams and long-polls served at once (PN_HTTP_MAX_STREAMS or its default)."""
        if self.http_max_streams is not None:
            return self.http_max_streams
        return max(1, min(self.http_max_connections - 1,
                          int(self.http_max_connections * STREAM_SHARE)))


#: Which processes read each setting (README's settings table, scripts/settings_table.py).
SERVE, WRITER, SUBSCRIBER, SPARK, TRIGGERER = (
    "serve", "writer", "subscriber", "Spark driver", "Airflow triggerer")
_EVERY = (SERVE, WRITER, SUBSCRIBER, SPARK, TRIGGERER)
_PUBLISHERS = (SERVE, WRITER, SPARK)
_FOLLOWERS = (SERVE, SUBSCRIBER, TRIGGERER)
_GROUPS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (_EVERY, ("store_url", "transport_url", "broker_username", "broker_password",
              "connect_timeout_seconds", "store_reply_timeout_seconds",
              "close_timeout_seconds", "heartbeat_ms", "sqlite_synchronous")),
    (_PUBLISHERS, ("server_name", "service_principal", "topic_prefix", "topic_policy",
                   "default_retention_seconds", "publish_timeout_seconds", "max_message_bytes",
                   "http_idempotency_ttl_seconds", "default_fs")),
    (_FOLLOWERS, ("poll_interval_seconds", "cross_process_wakeups", "foreign_messages")),
    ((SERVE, SUBSCRIBER), ("deadline_lookback_seconds",)),
)


def read_by(field: str) -> tuple[str, ...]:
    """The processes that read ``field``; a setting in no group is serve's alone."""
    for readers, fields in _GROUPS:
        if field in fields:
            return readers
    return (SERVE,)


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, with explicit ``overrides`` winning.

    Raises :class:`ConfigurationError` with one line per bad variable, named
    as the caller gave it: the keyword for an override, else the ``PN_*`` variable.
    """
    warn_unknown(os.environ)
    warn_unknown_in_env_file(Path.cwd() / str(Settings.model_config.get("env_file")))
    _refuse_unknown(overrides)
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except PydanticValidationError as exc:
        raise _invalid(exc, set(overrides)) from None
    except (UnicodeDecodeError, OSError) as exc:  # pydantic-settings reading ./.env
        raise ConfigurationError(
            f"the settings file .env in {os.getcwd()} cannot be read: {exc}") from None


def with_overrides(settings: Settings, **overrides: object) -> Settings:
    """``settings`` with ``overrides`` applied and every field validated again, as
    :func:`load_settings` validates them (a plain model copy would not)."""
    _refuse_unknown(overrides)
    try:
        return Settings.model_validate({**settings.model_dump(), **overrides})
    except PydanticValidationError as exc:
        raise _invalid(exc, set(overrides)) from None


def _refuse_unknown(overrides: Mapping[str, object]) -> None:
    known = list(Settings.model_fields)
    if unknown := sorted(set(overrides) - set(known)):
        raise ConfigurationError("invalid settings:\n" + "\n".join(
            f"{name} is not a setting" + "".join(f"; did you mean {c}?" for c in
                                                  difflib.get_close_matches(name, known, n=1))
            for name in unknown))


def _invalid(exc: PydanticValidationError, overridden: set[str]) -> ConfigurationError:
    return ConfigurationError(
        "invalid settings:\n" + "\n".join(_describe(e, overridden) for e in exc.errors()))


def known_variables() -> list[str]:
    """Every ``PN_*`` variable :class:`Settings` and the Airflow push sink read."""
    return sorted({f"PN_{n.upper()}" for n in Settings.model_fields} | AIRFLOW_PUSH_VARIABLES)


def warn_unknown(environ: Mapping[str, str]) -> list[str]:
    """Warn once per process, one line each, about ``PN_*`` variables nothing reads
    (a misspelled setting would otherwise be silently ignored); returns the lines."""
    return _warn(unknown_lines(((name, "") for name in sorted(environ)), known_variables()))


def warn_unknown_in_env_file(path: Path) -> list[str]:
    """The same for the keys of the ``.env`` file at ``path``, naming it and the line."""
    known = known_variables()
    keys = env_file_keys(path, Settings.model_config.get("env_file_encoding"), known)
    return _warn(unknown_lines(((key, f"{path}:{line}: ") for line, key in keys), known))


def _warn(lines: list[str]) -> list[str]:
    for line in lines:
        log.warning("%s", line)
    return lines


def _describe(error: object, overridden: set[str]) -> str:
    assert isinstance(error, dict)
    field = str(error["loc"][0]) if error.get("loc") else "?"
    var = (
        field
        if field in overridden
        else f"{Settings.model_config.get('env_prefix', '')}{field}".upper()
    )
    info = Settings.model_fields.get(field)
    # Never echo a secret's value, not even a malformed one.
    secret = "password" in field or (
        info is not None and info.annotation in (SecretStr, SecretStr | None)
    )
    value = "" if secret else f"={error.get('input')!r:.80}"
    return f"{var}{value}: {error.get('msg', 'invalid')}"
