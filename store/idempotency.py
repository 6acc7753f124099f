"""Idempotency keys over the SQL store: a retried write is answered, not written again.

One table (``pn_idempotency``, :mod:`partition_notify.store.idempotency_schema`)
for the HTTP API (``partition_notify.http.idempotency``, a principal per
token) and in-process writes (``partition_notify.publisher.idempotent``,
principal ``:local``). A key is stored inside the write's own transaction
(``record_in``) and kept ``ttl_seconds``; ``purge`` deletes expired keys
(``serve``'s housekeeping job, in batches).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from partition_notify.store.housekeeping import delete_where, in_batches, oldest
from partition_notify.store.idempotency_schema import MAX_IDEMPOTENCY_KEY_CHARS, IdempotencyRow
from partition_notify.store.provider import Store
from partition_notify.store.uow import UnitOfWork
from sqlalchemy import Table, select
from sqlalchemy.orm import Session

from partition_notify.core.errors import ValidationError

_KEYS = cast(Table, IdempotencyRow.__table__)
_KEY = re.compile(rf"[\x21-\x7e]{{1,{MAX_IDEMPOTENCY_KEY_CHARS}}}")


@dataclass(frozen=True, slots=True)
class StoredResponse:
    fingerprint: str
    status: int
    #: The JSON response body.
    body: dict[str, object]


class IdempotentReplay(Exception):
    """Raised inside a write's transaction: the key was used already; roll back."""

    def __init__(self, stored: StoredResponse) -> None:
        super().__init__("idempotency key already used")
        self.stored = stored


def check_idempotency_key(key: str) -> str:
    if not _KEY.fullmatch(key):
        raise ValidationError(
            f"Idempotency-Key {key[:40]!r}: expected 1 to {MAX_IDEMPOTENCY_KEY_CHARS} "
            "printable ASCII characters without spaces"
        )
    return key


class IdempotencyRepository:
    """Rows of ``pn_idempotency``; takes a Session, never commits."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, principal: str, key: str) -> IdempotencyRow | None:
        stmt = select(IdempotencyRow).where(
            IdempotencyRow.principal == principal, IdempotencyRow.key == key
        )
        return self.session.scalars(stmt).one_or_none()

    def add(self, row: IdempotencyRow) -> None:
        self.session.add(row)
        self.session.flush()

    def remove(self, row: IdempotencyRow) -> None:
        self.session.delete(row)
        self.session.flush()

    def purge_batch(self, now: float, n: int) -> int:
        """Delete the ``n`` keys that expired first (at or before ``now``)."""
        c = _KEYS.c
        return delete_where(self.session, _KEYS, oldest(c.id, c.expires_at, c.expires_at <= now, n))


class IdempotencyKeys:
    """Stored responses by (principal, key); each method is one unit of work."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _uow(self, *, write: bool = False) -> UnitOfWork:
        return UnitOfWork(self.store.engine, write=write)

    def stored_response(self, principal: str, key: str) -> StoredResponse | None:
        with self._uow() as uow:
            row = IdempotencyRepository(uow.session).get(principal, key)
            if row is None or row.expires_at <= self.store.clock():
                return None
            return StoredResponse(row.fingerprint, row.status, json.loads(row.response))

    def record_in(
        self,
        uow: UnitOfWork,
        *,
        principal: str,
        key: str,
        fingerprint: str,
        status: int,
        body: dict[str, object],
        ttl_seconds: float,
    ) -> None:
        """Store a response inside a write's own transaction (see ``Store.log.append``).

        Every write holds the event counter's lock by now, so the check
        cannot race another writer with the same key.
        """
        repo = IdempotencyRepository(uow.session)
        now = self.store.clock()
        row = repo.get(principal, key)
        if row is not None:
            if row.expires_at > now:
                raise IdempotentReplay(
                    StoredResponse(row.fingerprint, row.status, json.loads(row.response))
                )
            repo.remove(row)
        repo.add(
            IdempotencyRow(
                principal=principal,
                key=key,
                fingerprint=fingerprint,
                status=status,
                response=json.dumps(body, separators=(",", ":")),
                created_at=now,
                expires_at=now + ttl_seconds,
            )
        )

    def restate(self, principal: str, key: str, status: int, body: dict[str, object]) -> None:
        """Replace a stored response (a 201 that became 202: the broker did not confirm),
        so a retry is answered with what the first request was."""
        with self._uow(write=True) as uow:
            row = IdempotencyRepository(uow.session).get(principal, key)
            if row is not None:
                row.status = status
                row.response = json.dumps(body, separators=(",", ":"))

    def purge(self, *, batch_size: int = 1000,
              between_batches: Callable[[], None] | None = None) -> int:
        """Delete expired keys, oldest first, one transaction per batch; how many.

        ``serve`` passes ``PN_PURGE_BATCH_SIZE`` (and SQLite's smaller cap)."""
        now = self.store.clock()
        return in_batches(
            lambda: self._uow(write=True),
            lambda uow, n: IdempotencyRepository(uow.session).purge_batch(now, n),
            batch_size=batch_size, between_batches=between_batches)
