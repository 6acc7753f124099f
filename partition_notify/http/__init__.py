"""The HTTP API of ``partition-notify serve`` (FastAPI on uvicorn; extra ``http``).

Off unless ``PN_HTTP_BIND=host:port``. See docs/http-api.md.

The names below are imported on first use: the CLI's ``token`` commands
read this feature's table through :mod:`partition_notify.http.store` (plain
SQL) in installs without the ``http`` extra, so importing the package must
not load FastAPI.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from partition_notify.http.app import create_http_app
    from partition_notify.http.auth import Principal, require_role
    from partition_notify.http.idempotency import IdempotencyKey, fingerprint, idempotent_write

_WHERE = {
    "create_http_app": "partition_notify.http.app",
    "Principal": "partition_notify.http.auth",
    "require_role": "partition_notify.http.auth",
    "IdempotencyKey": "partition_notify.http.idempotency",
    "fingerprint": "partition_notify.http.idempotency",
    "idempotent_write": "partition_notify.http.idempotency",
}

__all__ = [
    "IdempotencyKey",
    "Principal",
    "create_http_app",
    "fingerprint",
    "idempotent_write",
    "require_role",
]


def __getattr__(name: str) -> object:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_WHERE[name]), name)
