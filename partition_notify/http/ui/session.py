"""Who is looking at ``/ui``: the bearer token kept in a cookie, and CSRF checks.

The sign-in form stores the token the user pastes in an ``HttpOnly``,
``SameSite=Strict`` cookie scoped to ``/ui`` (scripts cannot read it, other
sites cannot send it). Admin forms carry a CSRF token derived from the
session's token (a page from another origin cannot compute it) and must
come from our own origin; the server checks both and the role on every
POST, whatever the page showed.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import parse_qs

from fastapi import Request

from partition_notify.core.api_roles import ROLES
from partition_notify.http.auth import ANONYMOUS, Principal
from partition_notify.http.context import HttpContext
from partition_notify.http.problems import ApiProblem

COOKIE = "pn_ui_token"
#: Longest form body the UI accepts (sign-in, admin actions); the API's own
#: PN_HTTP_MAX_BODY_BYTES still applies before this.
MAX_FORM_BYTES = 16_384


def cookie_token(request: Request) -> str | None:
    raw = request.cookies.get(COOKIE, "").strip()
    return raw or None


def viewer(request: Request, ctx: HttpContext) -> Principal | None:
    """The signed-in principal; anonymous if allowed; None: send to the sign-in form."""
    token = cookie_token(request)
    if token is not None:
        info = ctx.http_store.authenticate(token)
        if info is not None:
            return Principal(info.name, info.role)
    if ctx.settings.http_anonymous_read:
        return ANONYMOUS
    return None


def is_admin(who: Principal) -> bool:
    return who.role is not None and ROLES.index(who.role) >= ROLES.index("admin")


def csrf_token(request: Request) -> str:
    token = cookie_token(request) or ""
    return hmac.new(token.encode(), b"partition-notify /ui csrf", hashlib.sha256).hexdigest()


async def read_form(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body, first value per field."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise ApiProblem(415, "unsupported-media-type", "Unsupported media type",
                         f"header.Content-Type: expected application/x-www-form-urlencoded, "
                         f"got {kind[:60]!r}", field="header.Content-Type")
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise ApiProblem(413, "too-large", "Payload too large",
                         f"body: a form of {len(body)} bytes is over {MAX_FORM_BYTES}")
    try:
        fields = parse_qs(body.decode(), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiProblem(400, "invalid-input", "Invalid input",
                         "body: not a URL-encoded form", field="body") from exc
    return {k: v[0] for k, v in fields.items()}


def check_admin_post(request: Request, who: Principal | None, form: dict[str, str]) -> None:
    """Refuse an admin action unless signed in as admin, same-origin, with the CSRF token."""
    if who is None or who.anonymous:
        raise ApiProblem(401, "unauthorized", "Unauthorized",
                         "cookie.pn_ui_token: sign in at /ui/sign-in first")
    if not is_admin(who):
        raise ApiProblem(403, "forbidden", "Forbidden",
                         f"token {who.name!r} has role {who.role!r}; this action needs 'admin'")
    origin = request.headers.get("origin")
    own = f"{request.url.scheme}://{request.url.netloc}"
    if origin is not None and origin != own:
        raise ApiProblem(403, "forbidden", "Forbidden",
                         f"header.Origin: {origin[:80]!r} is not this server ({own})",
                         field="header.Origin")
    sent = form.get("csrf", "")
    if not hmac.compare_digest(sent, csrf_token(request)):
        raise ApiProblem(403, "forbidden", "Forbidden",
                         "form.csrf: missing or wrong CSRF token (reload the page)",
                         field="form.csrf")
