"""Settings, read from ``PN_*`` environment variables (or a ``.env`` file).

Nothing here is built at import time: call :func:`load_settings` (the
composition root does) so tests and tools can pass their own values.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from partition_notify.contract.topics import TopicPolicy

DEFAULT_RETENTION_SECONDS = 7 * 24 * 3600


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PN_", env_file=".env", extra="ignore")

    store_url: str = Field(
        "sqlite:///./partition-notify.db",
        description="SQLAlchemy URL of the store: sqlite:///path or postgresql+psycopg://...",
    )
    transport_url: str = Field(
        "embedded://",
        description="embedded:// (the store is the bus), stomp://host:61613, kafka://host:9092",
    )
    broker_username: str | None = None
    broker_password: SecretStr | None = None

    server_name: str = Field("partition-notify", description="'server' field of messages")
    service_principal: str = ""
    topic_prefix: str = "hcat"
    topic_policy: TopicPolicy = TopicPolicy.PER_TABLE
    default_retention_seconds: int = Field(DEFAULT_RETENTION_SECONDS, gt=0)

    connect_timeout_seconds: float = Field(10.0, gt=0)
    publish_timeout_seconds: float = Field(10.0, gt=0)
    close_timeout_seconds: float = Field(5.0, gt=0)
    heartbeat_ms: int = Field(5000, ge=0, description="STOMP heart-beat interval")
    poll_interval_seconds: float = Field(
        0.02, gt=0, description="embedded transport: how often consumers read the log"
    )

    purge_interval_seconds: float = Field(60.0, gt=0)
    purge_batch_size: int = Field(5000, gt=0)
    relay_interval_seconds: float = Field(1.0, gt=0)
    relay_batch_size: int = Field(500, gt=0)
    relay_lease_seconds: float | None = Field(
        None, gt=0, description="how long a relay owns leased entries (default 3x publish timeout)"
    )
    relay_writer_grace_seconds: float | None = Field(
        None, ge=0, description="leave entries this young to their writer (default timeout + 5 s)"
    )
    relay_max_backoff_seconds: float = Field(8.0, gt=0)
    spark_spool_interval_seconds: float = Field(
        5.0, gt=0, description="serve: how often it looks for Spark commit manifests"
    )
    spark_spool_dirs: str = Field(
        "", description="serve: extra comma-separated dirs holding Spark commit manifests"
    )
    log_format: Literal["text", "json"] = "text"
    metrics_port: int | None = Field(None, description="serve: Prometheus endpoint port")
    # HTTP API and deadlines (docs/http-api.md)
    http_bind: str | None = Field(None, description="serve: host:port of the HTTP API (off unset)")
    http_anonymous_read: bool = Field(False, description="HTTP reads without a token")
    http_max_body_bytes: int = Field(1 << 20, gt=0, description="larger request bodies get 413")
    http_wait_max_seconds: float = Field(300.0, gt=0, description="longest HTTP long-poll")
    http_idempotency_ttl_seconds: int = Field(86400, gt=0, description="Idempotency-Key lifetime")
    http_shutdown_timeout_seconds: float = Field(10.0, gt=0, description="HTTP drain on stop")
    deadline_check_interval_seconds: float = Field(30.0, gt=0, description="lateness re-check")
    deadline_lookback_seconds: int = Field(
        86400, gt=0, description="deadlines older than this are not checked (first start)"
    )


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, with explicit ``overrides`` winning."""
    return Settings(**overrides)  # type: ignore[arg-type]
