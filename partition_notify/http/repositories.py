"""The repository of the HTTP API's token table; takes a Session, never commits."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from partition_notify.http.schema import ApiTokenRow


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
