"""Bearer tokens of the HTTP API and its stream replay, over the SQL store.

Tokens are 256-bit random strings shown once; the store keeps their SHA-256
(a fast hash is enough for a high-entropy secret: there is nothing to guess).
Idempotency keys are in :mod:`partition_notify.store.idempotency` (the
publisher's in-process keys share them); ``HttpContext.idempotency`` reaches them.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import select

from partition_notify.core.api_roles import ROLES
from partition_notify.core.errors import ConflictError, NotFoundError, ValidationError
from partition_notify.http.repositories import ApiTokenRepository
from partition_notify.http.schema import ApiTokenRow
from partition_notify.store.schema import EventRow
from partition_notify.store.uow import UnitOfWork

if TYPE_CHECKING:
    from partition_notify.store.provider import Store

TOKEN_PREFIX = "pn_"
_NAME = re.compile(r"[A-Za-z0-9._@-]{1,128}")


@dataclass(frozen=True, slots=True)
class TokenInfo:
    name: str
    role: str
    created_at: float
    revoked_at: float | None = None

    def allows(self, role: str) -> bool:
        return ROLES.index(self.role) >= ROLES.index(role)

    @classmethod
    def of(cls, row: ApiTokenRow) -> TokenInfo:
        return cls(row.name, row.role, row.created_at, row.revoked_at)


_TOKEN_SQL = ("SELECT token_sha256, name, role, created_at, revoked_at FROM pn_api_tokens "
              "WHERE token_sha256 = {p}")


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def check_role(role: object) -> str:
    if role not in ROLES:
        raise ValidationError(f"role {role!r} is not one of {', '.join(ROLES)}")
    return str(role)


def check_token_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValidationError(
            f"token name {name!r}: expected 1 to 128 of letters, digits and '._@-'"
        )
    return name


class HttpStore:
    """Tokens and the stream replay; each method is one unit of work."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _uow(self, *, write: bool = False) -> UnitOfWork:
        return UnitOfWork(self.store.engine, write=write)

    # -- tokens ---------------------------------------------------------------
    def create_token(self, name: str, role: str) -> tuple[TokenInfo, str]:
        """A new token: (info, the token itself — shown once, never stored)."""
        check_token_name(name)
        check_role(role)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self._uow(write=True) as uow:
            repo = ApiTokenRepository(uow.session)
            if repo.by_name(name) is not None:
                raise ConflictError(f"a token named {name!r} exists already (revoke it first)")
            row = ApiTokenRow(
                name=name, role=role, token_sha256=digest(token), created_at=self.store.clock()
            )
            repo.add(row)
            return TokenInfo.of(row), token

    def tokens(self) -> list[TokenInfo]:
        with self._uow() as uow:
            return [TokenInfo.of(r) for r in ApiTokenRepository(uow.session).all()]

    def revoke_token(self, name: str) -> TokenInfo:
        """Revoke a token; its name becomes free for a new one."""
        with self._uow(write=True) as uow:
            repo = ApiTokenRepository(uow.session)
            row = repo.by_name(check_token_name(name))
            if row is None:
                raise NotFoundError(f"no token named {name!r}")
            info = TokenInfo(row.name, row.role, row.created_at, self.store.clock())
            uow.session.delete(row)
            return info

    def authenticate(self, token: str) -> TokenInfo | None:
        """The live token ``token`` is, or None (every request asks: a hot read)."""
        wanted = digest(token)
        rows = self.store.read(_TOKEN_SQL, (wanted,))
        # The look-up is by hash; compare again in constant time anyway.
        if not rows or not hmac.compare_digest(rows[0][0], wanted):
            return None
        _, name, role, created_at, revoked_at = rows[0]
        return None if revoked_at is not None else TokenInfo(name, role, created_at, revoked_at)

    def signing_keys(self, role: str = "write") -> list[bytes]:
        """Keys that verify a spooled manifest: each live token's digest with ``role`` or more
        (see :mod:`partition_notify.writers.spool_signature`)."""
        with self._uow() as uow:
            rows = ApiTokenRepository(uow.session).all()
            return [r.token_sha256.encode("ascii") for r in rows
                    if r.revoked_at is None and TokenInfo.of(r).allows(role)]

    # -- stream replay --------------------------------------------------------
    def events_of_table_after(
        self, table_id: int, after: int, limit: int
    ) -> list[tuple[int, str, str]]:
        """(event id, event type, body) of one table's events after ``after``, oldest first."""
        stmt = (
            select(EventRow.event_id, EventRow.event_type, EventRow.body)
            .where(EventRow.table_id == table_id, EventRow.event_id > after)
            .order_by(EventRow.event_id)
            .limit(limit)
        )
        with self._uow() as uow:
            return [(int(r[0]), str(r[1]), str(r[2])) for r in uow.session.execute(stmt)]
