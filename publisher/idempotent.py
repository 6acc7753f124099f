"""Idempotency keys for Python and CLI writes: a retried write never logs twice.

The HTTP API's ``Idempotency-Key`` for callers that write in-process
(:meth:`Publisher.send_mark_set_done` / :meth:`Publisher.announce_partitions`
with ``idempotency_key=``, the CLI's ``--idempotency-key``). The key and the
ids of the events it logged are stored in ``pn_idempotency`` inside the
transaction that logs them, under the principal :data:`LOCAL_PRINCIPAL`
(a name no HTTP token can have), for ``idempotency_ttl_seconds``. So a retry
either finds the key (and gets the messages logged the first time, nothing
logged again) or finds that nothing was written. The same key with another
request is refused (:class:`ConflictError`), nothing stored.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from partition_notify.store import Store
from partition_notify.store.idempotency import (
    IdempotencyKeys,
    IdempotentReplay,
    StoredResponse,
    check_idempotency_key,
)
from partition_notify.store.provider import InTxn
from partition_notify.store.uow import UnitOfWork

from partition_notify.contract import AnyMessage, decode
from partition_notify.core import limits
from partition_notify.core.errors import ConflictError, StoreError

#: Keys of in-process writes live apart from every HTTP token's (':' is not allowed in those).
LOCAL_PRINCIPAL = ":local"
#: How long a key is kept unless told otherwise (App: PN_HTTP_IDEMPOTENCY_TTL_SECONDS).
DEFAULT_TTL_SECONDS = limits.IDEMPOTENCY_TTL_SECONDS

Write = Callable[[InTxn], list[AnyMessage]]


def once(
    store: Store, key: str, request: object, write: Write, *, ttl_seconds: float,
    in_txn: InTxn | None = None,
) -> list[AnyMessage]:
    """Run ``write`` at most once for ``key``; a retry returns the messages logged first.

    ``request`` (JSON-able) identifies what was asked; ``in_txn`` is the
    caller's own hook, run in the same transaction before the key is stored.
    """
    check_idempotency_key(key)
    fp = hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()
    keys = IdempotencyKeys(store)
    stored = keys.stored_response(LOCAL_PRINCIPAL, key)
    if stored is not None:
        return _replayed(store, stored, key, fp)

    def record(uow: UnitOfWork, messages: list[AnyMessage]) -> None:
        if in_txn is not None:
            in_txn(uow, messages)
        keys.record_in(uow, principal=LOCAL_PRINCIPAL, key=key, fingerprint=fp, status=201,
                       body={"eventIds": [m.event_id for m in messages]},
                       ttl_seconds=ttl_seconds)

    try:
        return write(record)
    except IdempotentReplay as replay:  # another process wrote with this key meanwhile
        return _replayed(store, replay.stored, key, fp)


def _replayed(store: Store, stored: StoredResponse, key: str, fp: str) -> list[AnyMessage]:
    if stored.fingerprint != fp:
        raise ConflictError(
            f"idempotency key {key!r} was already used for a different write; nothing was stored"
        )
    raw = stored.body.get("eventIds")
    ids = [int(i) for i in raw] if isinstance(raw, list) else []
    if not ids:
        return []
    found = {e.event_id: e for e in store.log.events_after(min(ids) - 1, max(ids) - min(ids) + 1)}
    missing = [i for i in ids if i not in found]
    if missing:
        raise StoreError(
            f"idempotency key {key!r}: events {missing} it logged are no longer in the event log"
        )
    return [decode(found[i].body, found[i].headers) for i in ids]
