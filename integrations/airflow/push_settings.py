"""``PN_AIRFLOW_*``: the settings of ``serve``'s Airflow push sink (:mod:`.push`), and
their loading, which reports a bad value as every ``PN_*`` setting is reported: one line
naming the variable, its value (never the password's) and what was expected."""

from __future__ import annotations

import logging
import os
import re
from typing import TYPE_CHECKING

from pydantic import Field, SecretStr, field_validator
from pydantic import ValidationError as PydanticValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from partition_notify.core.errors import ConfigurationError
from partition_notify.core.limits import MAX_SECONDS

if TYPE_CHECKING:
    from partition_notify.store import Store

log = logging.getLogger(__name__)

PREFIX = "PN_AIRFLOW_"
ASSETS_EXAMPLE = '{"sales.orders": "sales_orders"}'
#: What urllib can send a request to: a scheme it knows, a host, nothing it must refuse.
_URL = re.compile(
    r"https?://([^\s/?#@]*@)?(\[[0-9A-Fa-f:.]+\]|[^\s/?#:@\[\]]+)(:\d{1,5})?(/[^\s?#]*)?")


class AirflowPushSettings(BaseSettings):
    """``PN_AIRFLOW_*``: where and what the sink pushes. Off unless ``PN_AIRFLOW_URL`` is set."""

    # No NaN or infinity: a deadline of either overflows the socket's timer, an interval
    # never comes (as for every PN_* setting, partition_notify/settings.py).
    model_config = SettingsConfigDict(env_prefix=PREFIX, env_file=".env", extra="ignore",
                                      allow_inf_nan=False)

    url: str | None = Field(None, description="Airflow API server, e.g. http://airflow:8080")
    username: str | None = None
    password: SecretStr | None = None
    assets: dict[str, str | int] = Field(
        default_factory=dict,
        description='JSON: {"db.table": asset name or id}; only these tables are pushed',
    )
    timeout_seconds: float = Field(
        10.0, gt=0, description="deadline of each Airflow API request as a whole (connect, "
        "answer, body; answers over 8 MiB are refused)")
    interval_seconds: float = Field(1.0, gt=0)
    batch_size: int = Field(500, gt=0)
    settle_timeout_seconds: float = Field(
        900.0, gt=0,
        description="how long a table waits for Airflow to say whether a maybe-sent set-done "
                    "arrived before dead-lettering it as unknown",
    )

    @field_validator("timeout_seconds", "interval_seconds", "settle_timeout_seconds")
    @classmethod
    def _at_most_ten_years(cls, value: float) -> float:
        if value > MAX_SECONDS:
            raise ValueError(f"must be at most {MAX_SECONDS} seconds (ten years)")
        return value

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        # Checked at start: a bad one failed every push run instead ("unknown url type").
        if value and not _URL.fullmatch(value):
            raise ValueError("expected http(s)://host[:port] of the Airflow API server, "
                             "e.g. http://airflow:8080")
        return value

    @field_validator("assets")
    @classmethod
    def _asset_refs(cls, value: dict[str, str | int]) -> dict[str, str | int]:
        for table, asset in value.items():
            if isinstance(asset, bool) or asset == "" or (isinstance(asset, int) and asset < 1):
                raise ValueError(f"{table}: expected an asset name (non-empty text) or id "
                                 f"(a positive integer), got {asset!r}")
        return value


def load_push_settings() -> AirflowPushSettings:
    """The ``PN_AIRFLOW_*`` environment (and ``.env``), or a ConfigurationError in one line."""
    try:
        return AirflowPushSettings()  # type: ignore[call-arg]  # fields come from PN_AIRFLOW_*
    except SettingsError:
        # pydantic-settings decodes a dict field's JSON before validating: only assets is one.
        raw = os.environ.get(f"{PREFIX}ASSETS")
        where = " (in .env)" if raw is None else f"={raw!r:.80}"
        raise ConfigurationError(f"invalid settings: {PREFIX}ASSETS{where}: expected JSON like "
                                 f"{ASSETS_EXAMPLE}") from None
    except PydanticValidationError as exc:
        first: dict[object, str] = {}  # a union field fails once per member: say it once
        for e in exc.errors():
            first.setdefault(e["loc"][:1], _describe(e["loc"], e.get("input"), e["msg"]))
        raise ConfigurationError("invalid settings: " + "; ".join(first.values())) from None


def _describe(loc: tuple[int | str, ...], value: object, msg: str) -> str:
    field = str(loc[0]) if loc else "?"
    var = f"{PREFIX}{field.upper()}"
    value = os.environ.get(var, value)  # as the user wrote it, not as JSON decoded it
    shown = "" if field == "password" else f"={value!r:.80}"  # never a secret's value
    example = f"; expected JSON like {ASSETS_EXAMPLE}" if field == "assets" else ""
    return f"{var}{shown}: {msg}{example}"


def unregistered(store: Store, mapped: list[str], *, warn: bool = False) -> list[str]:
    """The mapped tables (``db.table``) not registered, sorted; ``warn``: one WARNING
    naming them (serve's startup). Not refused: a producer's first run may register one
    after serve started, and it is pushed from then on (``pn_airflow_push_unregistered_
    tables`` counts them meanwhile). A name that is not ``db.table`` never can be: refused."""
    bad = next((t for t in mapped if len(t.split(".")) != 2 or "" in t.split(".")), None)
    if bad is not None:
        raise ConfigurationError(f"invalid settings: {PREFIX}ASSETS: {bad!r} is not a "
                                 f"table name: expected db.table, e.g. {ASSETS_EXAMPLE}")
    refs = [(t.split(".")[0], t.split(".")[1]) for t in mapped]
    found = store.catalog.find_tables(refs)
    missing = sorted(f"{db}.{name}" for db, name in refs if (db, name) not in found)
    if missing and warn:
        log.warning("%sASSETS maps %s, not registered (yet): nothing is pushed for them "
                    "until they are (partition-notify register %s --keys ..., or the "
                    "producer's first run)", PREFIX, ", ".join(missing), missing[0],
                    extra={"pn_event": "airflow_push.unregistered"})
    return missing
