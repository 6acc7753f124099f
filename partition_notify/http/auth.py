"""Bearer-token authentication and role checks.

Roles are ordered ``read < write < admin``. A missing or unknown token is 401
with ``WWW-Authenticate``; a valid token whose role is too low is 403. Reads
are anonymous only with ``PN_HTTP_ANONYMOUS_READ=true``; writes never are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from partition_notify.core.api_roles import ROLES
from partition_notify.http.context import HttpContext, context
from partition_notify.http.problems import ApiProblem

REALM = 'Bearer realm="partition-notify"'
#: Declares the scheme in OpenAPI; the checks below are ours (auto_error off).
bearer_scheme = HTTPBearer(auto_error=False, description="partition-notify token <name>")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: a token's name and role, or anonymous (role None)."""

    name: str
    role: str | None

    @property
    def anonymous(self) -> bool:
        return self.role is None


ANONYMOUS = Principal("anonymous", None)


def _unauthorized(detail: str, error: str | None) -> ApiProblem:
    challenge = REALM + (f', error="{error}"' if error else "")
    return ApiProblem(
        401, "unauthorized", "Unauthorized", detail, field="header.Authorization",
        headers={"WWW-Authenticate": challenge},
    )


def authenticate(request: Request, ctx: HttpContext) -> Principal:
    header = request.headers.get("authorization")
    if header is None:
        return ANONYMOUS
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise _unauthorized(
            "Authorization header must be 'Bearer <token>'", "invalid_request"
        )
    info = ctx.http_store.authenticate(token.strip())
    if info is None:
        raise _unauthorized("the bearer token is unknown or revoked", "invalid_token")
    return Principal(info.name, info.role)


def require_role(role: str) -> Callable[..., Principal]:
    """A dependency: the caller, if allowed ``role`` (``read``, ``write`` or ``admin``)."""
    if role not in ROLES:
        raise ValueError(f"role {role!r} is not one of {ROLES}")

    def dependency(
        request: Request,
        _creds: HTTPAuthorizationCredentials | None = Depends(bearer_scheme),  # noqa: B008
        ctx: HttpContext = Depends(context),  # noqa: B008
    ) -> Principal:
        who = authenticate(request, ctx)
        if who.anonymous:
            if role == "read" and ctx.settings.http_anonymous_read:
                return who
            raise _unauthorized(f"this endpoint needs a token with role {role!r}", None)
        assert who.role is not None
        if ROLES.index(who.role) < ROLES.index(role):
            raise ApiProblem(
                403, "forbidden", "Forbidden",
                f"token {who.name!r} has role {who.role!r}; this endpoint needs {role!r}",
                headers={"WWW-Authenticate": REALM + ', error="insufficient_scope"'},
            )
        return who

    dependency.__name__ = f"require_{role}"
    return dependency
