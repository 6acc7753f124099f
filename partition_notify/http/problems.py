"""Errors as RFC 9457 problem details (``application/problem+json``).

Every error a client can cause is a 4xx with the message the CLI would print
for the same input, plus ``field`` (which request field was wrong) where one
is known. Our exception tree maps by class; FastAPI's request validation
errors name the field from their location.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from partition_notify.core.errors import (
    ConfigurationError,
    ConflictError,
    NotFoundError,
    PartitionNotifyError,
    StoreError,
    TransportError,
    ValidationError,
    WaitTimeout,
)

log = logging.getLogger(__name__)
PROBLEM_JSON = "application/problem+json"
TYPE_BASE = "urn:partition-notify:problem:"

#: (exception class, status, slug, title) — first match wins, so subclasses first.
_MAPPING: tuple[tuple[type[PartitionNotifyError], int, str, str], ...] = (
    (ValidationError, 422, "invalid-input", "Invalid input"),
    (NotFoundError, 404, "not-found", "Not found"),
    (ConflictError, 409, "conflict", "Conflict"),
    (StoreError, 503, "store-unavailable", "Store unavailable"),
    (TransportError, 502, "transport-failed", "Message transport failed"),
    (WaitTimeout, 504, "timeout", "Timed out"),
    (ConfigurationError, 500, "configuration", "Server misconfigured"),
)


class ApiProblem(Exception):
    """Raise from a route to answer with a problem document."""

    def __init__(
        self,
        status: int,
        slug: str,
        title: str,
        detail: str,
        *,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status, self.slug, self.title, self.detail = status, slug, title, detail
        self.field = field
        self.headers = headers or {}


def problem_response(
    status: int,
    slug: str,
    title: str,
    detail: str,
    *,
    field: str | None = None,
    headers: dict[str, str] | None = None,
    instance: str | None = None,
) -> JSONResponse:
    body: dict[str, str | int] = {
        "type": TYPE_BASE + slug,
        "title": title,
        "status": status,
        "detail": detail,
    }
    if field is not None:
        body["field"] = field
    if instance is not None:
        body["instance"] = instance
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


#: What a client is told instead of a database driver's words (logged server-side).
_DRIVER_DETAIL = {
    ConflictError: "the write conflicted with a concurrent one; nothing of it was stored",
    StoreError: "the store failed or is unreachable; retry later",
}


def _from_driver(exc: BaseException) -> bool:
    cause = exc.__cause__
    return isinstance(cause, sqlite3.Error | SQLAlchemyError)


def from_error(exc: PartitionNotifyError, field: str | None = None) -> ApiProblem:
    detail = " ".join(str(exc).split())
    if _from_driver(exc):
        # Driver text (SQL, constraint and key names, values) never goes in a body.
        log.warning("store error behind an HTTP problem: %s", detail)
        detail = next((d for cls, d in _DRIVER_DETAIL.items() if isinstance(exc, cls)),
                      "the store failed")
    for cls, status, slug, title in _MAPPING:
        if isinstance(exc, cls):
            return ApiProblem(status, slug, title, detail, field=field)
    return ApiProblem(500, "internal", "Internal error", detail, field=field)


@contextmanager
def about(field: str) -> Iterator[None]:
    """Input errors raised inside name ``field`` as the culprit; others pass through."""
    try:
        yield
    except (ValidationError, NotFoundError, ConflictError) as exc:
        raise from_error(exc, field) from exc


def _field_of(loc: Iterable[object]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in {"body", "query", "path", "header"}:
        where, rest = parts[0], parts[1:]
        return f"{where}.{'.'.join(rest)}" if rest else where
    return ".".join(parts)


def install(app: FastAPI) -> None:
    """Problem handlers for our errors, request validation and HTTP errors."""
    app.exception_handler(ApiProblem)(_problem)
    app.exception_handler(PartitionNotifyError)(_ours)
    app.exception_handler(RequestValidationError)(_invalid)
    app.exception_handler(Exception)(_bug)
    app.exception_handler(StarletteHTTPException)(_http)


async def _problem(request: Request, exc: ApiProblem) -> JSONResponse:
    return problem_response(
        exc.status, exc.slug, exc.title, exc.detail, field=exc.field,
        headers=exc.headers, instance=request.url.path,
    )


async def _ours(request: Request, exc: PartitionNotifyError) -> JSONResponse:
    p = from_error(exc)
    if p.status >= 500:
        log.warning("%s %s: %s", request.method, request.url.path, p.detail)
    return problem_response(p.status, p.slug, p.title, p.detail, instance=request.url.path)


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    # Pydantic's error details, read as plain mappings (FastAPI leaves them untyped).
    errors: list[Mapping[str, object]] = [dict(e) for e in exc.errors()]
    first: Mapping[str, object] = (
        errors[0] if errors else {"loc": (), "msg": "invalid request", "type": ""}
    )
    raw_loc = first.get("loc", ())
    loc = list(raw_loc) if isinstance(raw_loc, (list, tuple)) else []
    field = _field_of(loc)
    if first.get("type") == "json_invalid":
        where = f" at char {loc[1]}" if len(loc) > 1 else ""
        ctx = first.get("ctx")
        why = ctx.get("error", first.get("msg")) if isinstance(ctx, dict) and ctx \
            else first.get("msg")
        return problem_response(
            400, "malformed-json", "Malformed request body",
            f"request body is not valid JSON: {why}{where}", field="body",
            instance=request.url.path,
        )
    declared = request.headers.get("content-type", "")
    if field == "body" and isinstance(first.get("input"), bytes) and not json_type(declared):
        # FastAPI parses a body as JSON only when it is declared so; say that, not "invalid".
        return problem_response(
            415, "unsupported-media-type", "Unsupported media type",
            f"Content-Type {declared!r:.80}: this route takes a JSON body; send it with "
            "Content-Type: application/json", field="header.Content-Type",
            instance=request.url.path)
    more = f" ({len(errors)} errors; first shown)" if len(errors) > 1 else ""
    detail = f"{field}: {first.get('msg')}{more}"
    if "input" in first and first["type"] not in {"missing"}:
        detail += f", got {_short(first['input'])}"
    return problem_response(
        422, "invalid-input", "Invalid input", detail, field=field, instance=request.url.path,
    )


def json_type(content_type: str) -> bool:
    """Whether FastAPI parses a body of this Content-Type as JSON."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


async def _bug(request: Request, exc: Exception) -> JSONResponse:
    # Not the client's fault: logged with its traceback, answered without it.
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return problem_response(
        500, "internal", "Internal error",
        f"the server failed on this request ({type(exc).__name__}); it is logged",
        instance=request.url.path,
    )


async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
        return problem_response(
            400, "malformed-json", "Malformed request body",
            "request body could not be parsed: it must be UTF-8 JSON, nested at most "
            "a few hundred levels deep", field="body", instance=request.url.path,
        )
    if exc.status_code == 413:
        return problem_response(
            413, "too-large", "Request body too large", str(exc.detail), field="body",
            instance=request.url.path,
        )
    title = {404: "Not found", 405: "Method not allowed"}.get(exc.status_code, "HTTP error")
    return problem_response(
        exc.status_code, f"http-{exc.status_code}", title, str(exc.detail),
        headers=dict(exc.headers or {}), instance=request.url.path,
    )


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class BodyLimit:
    """413 for request bodies over ``limit`` bytes, declared or streamed."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._too_large(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge(self.limit)
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await self._too_large(scope, receive, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem_response(
            413, "too-large", "Request body too large",
            _too_large_detail(self.limit),
            field="body", instance=scope.get("path"),
        )
        await response(scope, receive, send)


class _TooLarge(StarletteHTTPException):
    """Raised from ``receive``: FastAPI re-raises HTTP exceptions from body parsing."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, _too_large_detail(limit))


def _too_large_detail(limit: int) -> str:
    return f"request body is larger than {limit} bytes (PN_HTTP_MAX_BODY_BYTES)"
