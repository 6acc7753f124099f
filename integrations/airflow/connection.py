"""partition-notify settings from an Airflow Connection (secrets never in trigger kwargs).

A Connection of type ``partition_notify``: ``login``/``password`` are the
broker user and password; the ``extra`` JSON holds ``store_url``,
``transport_url`` and optionally any other setting by its ``PN_*`` name in
lower case without the prefix (``connect_timeout_seconds``, ...). Without a
connection id the ``PN_*`` environment of the worker/triggerer is used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING

from partition_notify.core.errors import ConfigurationError

if TYPE_CHECKING:
    from airflow.sdk import Connection

    from partition_notify.settings import Settings

#: Connection fields that are not settings.
_SECRET_FIELDS = frozenset({"broker_password"})


def settings_from(login: str | None, password: str | None,
                  extra: Mapping[str, object]) -> Settings:
    """Settings from a connection's parts; unknown extra keys are an error naming them."""
    # Imported here: triggers load this module on the triggerer's event loop, settings in a thread.
    from partition_notify.settings import Settings, load_settings

    known = set(Settings.model_fields)
    unknown = sorted(k for k in extra if k not in known or k in _SECRET_FIELDS)
    if unknown:
        raise ConfigurationError(
            f"partition-notify connection extra has unknown key(s) {unknown}; expected any of "
            f"{sorted(known - _SECRET_FIELDS - {'broker_username'})} (the broker user and "
            "password go in login/password)"
        )
    overrides: dict[str, object] = dict(extra)
    if login:
        overrides["broker_username"] = login
    if password:
        overrides["broker_password"] = password
    try:
        return load_settings(**overrides)
    except ValueError as exc:  # pydantic's ValidationError
        raise ConfigurationError(f"partition-notify connection: {exc}") from exc


def _from_connection(conn: Connection) -> Settings:
    extra = conn.extra_dejson if conn.extra else {}
    if not isinstance(extra, dict):
        raise ConfigurationError(f"connection {conn.conn_id!r}: extra must be a JSON object")
    return settings_from(conn.login, conn.password, extra)


def _from_environment() -> Settings:
    from partition_notify.settings import load_settings

    return load_settings()


def get_settings(conn_id: str | None) -> Settings:
    """Blocking: for operators (workers), never on an event loop."""
    if conn_id is None:
        return _from_environment()
    from partition_notify.integrations.airflow._compat import BaseHook

    return _from_connection(BaseHook.get_connection(conn_id))


async def aget_settings(conn_id: str | None) -> Settings:
    """For triggers: the connection is fetched, and settings built, without blocking the loop."""
    if conn_id is None:
        return await asyncio.to_thread(_from_environment)
    from partition_notify.integrations.airflow._compat import BaseHook

    getter = getattr(BaseHook, "aget_connection", None)
    if getter is not None:
        conn = await getter(conn_id)
    else:  # Airflow 2.x
        conn = await asyncio.to_thread(BaseHook.get_connection, conn_id)
    return await asyncio.to_thread(_from_connection, conn)
