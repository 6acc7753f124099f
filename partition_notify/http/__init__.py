"""The HTTP API of ``partition-notify serve`` (FastAPI on uvicorn; extra ``http``).

Off unless ``PN_HTTP_BIND=host:port``. See docs/http-api.md.
"""

from partition_notify.http.app import create_http_app
from partition_notify.http.auth import Principal, require_role
from partition_notify.http.idempotency import IdempotencyKey, fingerprint, idempotent_write

__all__ = [
    "IdempotencyKey",
    "Principal",
    "create_http_app",
    "fingerprint",
    "idempotent_write",
    "require_role",
]
