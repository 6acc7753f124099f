"""Repositories of the HTTP API tables; each takes a Session, none commits."""

from __future__ import annotations

from typing import cast

from sqlalchemy import Table, select
from sqlalchemy.orm import Session

from partition_notify.http.schema import ApiTokenRow, IdempotencyRow
from partition_notify.store.housekeeping import delete_where, oldest

_KEYS = cast(Table, IdempotencyRow.__table__)


class ApiTokenRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def by_name(self, name: str) -> ApiTokenRow | None:
        return self.session.scalars(
            select(ApiTokenRow).where(ApiTokenRow.name == name)
        ).one_or_none()

    def by_hash(self, digest: str) -> ApiTokenRow | None:
        return self.session.scalars(
            select(ApiTokenRow).where(ApiTokenRow.token_sha256 == digest)
        ).one_or_none()

    def all(self) -> list[ApiTokenRow]:
        return list(self.session.scalars(select(ApiTokenRow).order_by(ApiTokenRow.name)))

    def add(self, row: ApiTokenRow) -> None:
        self.session.add(row)
        self.session.flush()


class IdempotencyRepository:
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
        return delete_where(self.session, _KEYS, oldest(
            c.id, c.expires_at, c.expires_at <= now, n))
