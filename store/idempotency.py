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
from dataclasses import dataclass
from typing import cast

from partition_notify.store.housekeeping import BetweenBatches, delete_where, in_batches
from partition_notify.store.idempotency_schema import MAX_IDEMPOTENCY_KEY_CHARS, IdempotencyRow
from partition_notify.store.provider import Store
from partition_notify.store.purge_order import oldest_first
from partition_notify.store.uow import UnitOfWork
from sqlalchemy import Table, select
from sqlalchemy.orm import Session

from partition_notify.core.errors import ValidationError

_KEYS = cast(Table, IdempotencyRow.__table__)
_GET_SQL = ('SELECT id, fingerprint, status, response, expires_at FROM pn_idempotency '
            'WHERE principal = {p} AND "key" = {p}')
_ADD_SQL = ('INSERT INTO pn_idempotency (principal, "key", fingerprint, status, response, '
            "created_at, expires_at) VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p})")
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
    if not isinstance(key, str):  # from Python callers: an int is no key
        raise ValidationError(f"idempotency key must be a string, got {type(key).__name__} "
                              f"{key!r:.40}")
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

    def purge_batch(self, now: float, n: int) -> int:
        """Delete the ``n`` keys that expired first (at or before ``now``)."""
        c = _KEYS.c
        return delete_where(self.session, _KEYS, oldest_first(
            self.session, c.id, c.expires_at, c.expires_at <= now, n))


class IdempotencyKeys:
    """Stored responses by (principal, key); each method is one unit of work."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _uow(self, *, write: bool = False) -> UnitOfWork:
        return UnitOfWork(self.store.engine, write=write)

    def stored_response(self, principal: str, key: str) -> StoredResponse | None:
        """A pre-check before a write (``record_in`` checks again under the write lock),
        as a hot read."""
        rows = self.store.read(_GET_SQL, (principal, key))
        if not rows or rows[0][4] <= self.store.clock():
            return None
        _, fp, status, response, _ = rows[0]
        return StoredResponse(fp, int(status), json.loads(response))

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
        # Prebuilt statements, not ORM objects and a flush: this runs inside every
        # keyed write, and the ORM's unit of work was most of its time.
        now = self.store.clock()
        found = uow.run(_GET_SQL, (principal, key)).first()
        if found is not None:
            row_id, fp, stored_status, response, expires_at = tuple(found)
            if expires_at > now:
                raise IdempotentReplay(StoredResponse(fp, stored_status, json.loads(response)))
            uow.run("DELETE FROM pn_idempotency WHERE id = {p}", (row_id,))
        uow.run(_ADD_SQL, (principal, key, fingerprint, status,
                           json.dumps(body, separators=(",", ":")), now, now + ttl_seconds))

    def restate(self, principal: str, key: str, status: int, body: dict[str, object]) -> None:
        """Replace a stored response (a 201 that became 202: the broker did not confirm),
        so a retry is answered with what the first request was."""
        with self._uow(write=True) as uow:
            row = IdempotencyRepository(uow.session).get(principal, key)
            if row is not None:
                row.status = status
                row.response = json.dumps(body, separators=(",", ":"))

    def purge(self, *, batch_size: int = 1000,
              between_batches: BetweenBatches | None = None) -> int:
        """Delete expired keys, oldest first, one transaction per batch; how many.

        ``serve`` passes ``PN_PURGE_BATCH_SIZE`` (and SQLite's smaller cap)."""
        now = self.store.clock()
        return in_batches(
            lambda: self._uow(write=True),
            lambda uow, n: IdempotencyRepository(uow.session).purge_batch(now, n),
            batch_size=batch_size, between_batches=between_batches)
