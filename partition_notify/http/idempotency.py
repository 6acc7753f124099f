"""Idempotent writes: a retried request with the same ``Idempotency-Key`` never writes twice.

The key is optional (writes without one are not protected against retries;
announcing the same partition twice is a no-op anyway, a set-done is not).
With a key, the response is stored in the transaction that logs the
events, keyed by (token name, key), for ``PN_HTTP_IDEMPOTENCY_TTL_SECONDS``:

* same key, same request  -> the original status and body, header
  ``Idempotent-Replayed: true``; nothing is logged again;
* same key, other request -> 422 problem, nothing stored;
* two concurrent requests with one key -> one writes, the other replays
  (the check runs under the event counter's lock every writer takes).

Reusable by other routers (e.g. ``POST /v1/commits``): call
:func:`idempotent_write` from a sync route with a ``write`` that passes the
given ``in_txn`` to a :class:`~publisher.Publisher` method.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from typing import Annotated

from fastapi import Header
from fastapi.responses import JSONResponse

from partition_notify.contract import AnyMessage
from partition_notify.core.errors import PartitionNotifyError, PublishError, ValidationError
from partition_notify.http.auth import Principal
from partition_notify.http.context import HttpContext
from partition_notify.http.problems import ApiProblem, from_error
from partition_notify.store.idempotency import (
    IdempotentReplay,
    StoredResponse,
    check_idempotency_key,
)
from partition_notify.store.provider import InTxn
from partition_notify.store.uow import UnitOfWork

log = logging.getLogger(__name__)

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="Client-chosen key; a retry with the same key and body is answered "
        "with the original response and writes nothing.",
    ),
]
Render = Callable[[Sequence[AnyMessage]], dict[str, object]]


def fingerprint(principal: Principal, method: str, path: str, payload: object) -> str:
    canon = json.dumps([principal.name, method, path, payload], sort_keys=True, default=str)
    return hashlib.sha256(canon.encode()).hexdigest()


def _replay(stored: StoredResponse, key: str, fp: str) -> JSONResponse:
    if stored.fingerprint != fp:
        raise ApiProblem(
            422, "idempotency-key-reused", "Idempotency-Key reused",
            f"Idempotency-Key {key!r} was already used for a different request",
            field="header.Idempotency-Key",
        )
    return JSONResponse(
        stored.body,
        status_code=stored.status,
        headers={"Idempotent-Replayed": "true", "Idempotency-Key": key},
    )


def idempotent_write(
    ctx: HttpContext,
    principal: Principal,
    key: str | None,
    fp: str,
    write: Callable[[InTxn], object],
    render: Render,
    *,
    status: int = 201,
) -> JSONResponse:
    """Run ``write(in_txn)`` at most once per key; answer with ``render(messages)``.

    When the broker does not confirm after the commit, the events are logged
    and the relay will deliver them: 202 with the same body plus ``delivery``.
    """
    if key is not None:
        try:
            check_idempotency_key(key)
        except ValidationError as exc:
            raise from_error(exc, "header.Idempotency-Key") from exc
        stored = ctx.idempotency.stored_response(principal.name, key)
        if stored is not None:
            return _replay(stored, key, fp)
    captured: dict[str, dict[str, object]] = {}

    def in_txn(uow: UnitOfWork, messages: list[AnyMessage]) -> None:
        captured["body"] = render(messages)
        if key is not None:
            ctx.idempotency.record_in(
                uow, principal=principal.name, key=key, fingerprint=fp, status=status,
                body=captured["body"], ttl_seconds=ctx.settings.http_idempotency_ttl_seconds,
            )

    headers = {"Idempotency-Key": key} if key is not None else {}
    try:
        write(in_txn)
    except IdempotentReplay as replay:
        assert key is not None
        return _replay(replay.stored, key, fp)
    except PublishError as exc:
        if "body" not in captured:
            raise
        ctx.hub.poke()
        body = {**captured["body"], "delivery": f"pending: {' '.join(str(exc).split())}"}
        if key is not None:
            _restate(ctx, principal, key, body)
        return JSONResponse(body, status_code=202, headers=headers)
    ctx.hub.poke()
    return JSONResponse(captured["body"], status_code=status, headers=headers)


def _restate(ctx: HttpContext, principal: Principal, key: str, body: dict[str, object]) -> None:
    """A retry of a 202 is answered 202 with ``delivery``, not the 201 stored in the write."""
    try:
        ctx.idempotency.restate(principal.name, key, 202, body)
    except PartitionNotifyError as exc:  # the write stands; only the replay's status is off
        log.warning("could not record the 202 of Idempotency-Key %r: %s", key, exc)
