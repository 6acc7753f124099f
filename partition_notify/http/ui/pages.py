"""``/ui``: sign-in, the tables overview, a table's board and events, its live stream."""

from __future__ import annotations

import json
from typing import Annotated, get_args

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import RedirectResponse, Response
from sse_starlette import EventSourceResponse
from starlette.concurrency import run_in_threadpool

from partition_notify.contract import decode, messages, spec
from partition_notify.core.errors import MalformedMessageError
from partition_notify.core.limits import MAX_INT64
from partition_notify.http.auth import ANONYMOUS
from partition_notify.http.common import table_info, wanted_spec
from partition_notify.http.context import HttpContext, context
from partition_notify.http.problems import ApiProblem
from partition_notify.http.routes_live import PING_SECONDS, _event_id, _events, _still_in_log
from partition_notify.http.ui import board as boards
from partition_notify.http.ui.reads import CheckLine, StatusReadRepository, StatusReads
from partition_notify.http.ui.render import STATIC, page, static_file, timed, to_sign_in
from partition_notify.http.ui.session import COOKIE, cookie_token, read_form, viewer

router = APIRouter(prefix="/ui", include_in_schema=False)
Ctx = Annotated[HttpContext, Depends(context)]
#: Tables per page of the overview; events per page of a table's events.
PAGE_SIZE = 50
EVENTS_PAGE = 100


def _contract_types() -> tuple[str, ...]:
    """Every event type of the wire contract, read off the message union itself (each
    model's ``eventType`` literal): a message type added there is offered here too."""
    out: list[str] = []
    for model in get_args(messages.AnyWire):
        out.extend(get_args(model.model_fields["event_type"].annotation))
    return tuple(out)


#: The events page's type filter offers every type the wire contract has.
EVENT_TYPES = _contract_types()


@router.get("")
def home() -> RedirectResponse:
    return RedirectResponse("/ui/tables", status_code=303)


@router.get("/static/{name}")
def static(name: str) -> Response:
    if name not in STATIC:
        raise ApiProblem(404, "not-found", "Not found", f"path.name: no static file {name!r}",
                         field="path.name")
    return static_file(name)


@router.get("/sign-in")
def sign_in_form(request: Request,
                 target: Annotated[str, Query(alias="next", max_length=2000)] = "/ui/tables",
                 ) -> Response:
    return page(request, ANONYMOUS, "sign_in.html", next=_local(target), error=None)


@router.post("/sign-in")
async def sign_in(request: Request, ctx: Ctx) -> Response:
    form = await read_form(request)
    token, target = form.get("token", "").strip(), _local(form.get("next", ""))
    info = await run_in_threadpool(ctx.http_store.authenticate, token) if token else None
    if info is None:
        return page(request, ANONYMOUS, "sign_in.html", status=401, next=target,
                    error="That token is unknown or revoked.")
    out = RedirectResponse(target, status_code=303)
    out.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/ui",
                   secure=request.url.scheme == "https")
    return out


@router.post("/sign-out")
def sign_out() -> Response:
    out = RedirectResponse("/ui/sign-in", status_code=303)
    out.delete_cookie(COOKIE, path="/ui")
    return out


def _local(target: str) -> str:
    """Only a path of our own UI: never an open redirect to another site."""
    ok = target.startswith("/ui/") and not target.startswith("//") and "\\" not in target
    return target if ok else "/ui/tables"


@router.get("/tables")
@timed
def tables(request: Request, ctx: Ctx, q: Annotated[str, Query(max_length=300)] = "",
           page_no: Annotated[int, Query(alias="page", ge=1, le=1_000_000)] = 1,
           late: Annotated[bool, Query()] = False) -> Response:
    who = viewer(request, ctx)
    if who is None:
        return to_sign_in(request)
    _check_filter(q)
    reads = StatusReads(ctx.app.store)
    with reads.uow() as uow:
        repo = StatusReadRepository(uow.session)
        total, infos = repo.tables_page(q.strip(), (page_no - 1) * PAGE_SIZE, PAGE_SIZE,
                                        late_only=late)
        stats = repo.stats([t.id for t in infos], reads.now())
        late_total = repo.late_tables()
    pending, age = ctx.app.store.log.relay_lag()
    pages = max(1, -(-total // PAGE_SIZE))
    return page(request, who, "tables.html", tables=infos, stats=stats, q=q, page=page_no,
                pages=pages, total=total, relay_pending=pending, relay_age=age, late=late,
                late_total=late_total)


def _check_filter(q: str) -> None:
    """No table name holds a control character; PostgreSQL refuses a NUL in a string
    (a store error) and SQLite's LIKE stops at it (every table matches)."""
    bad = sorted({c for c in q if ord(c) < 32 or ord(c) == 127})
    if bad:
        raise ApiProblem(422, "invalid-input", "Invalid input",
                         f"query.q: {q[:80]!r} has control character(s) "
                         f"{''.join(bad)!r}; expected part of a db.table name",
                         field="query.q")


@router.get("/tables/{table}")
@timed
def board(request: Request, table: str, ctx: Ctx) -> Response:
    who = viewer(request, ctx)
    if who is None:
        return to_sign_in(request)
    info = table_info(ctx, table)
    cursor = ctx.hub.cursor  # before the reads: the stream replays whatever comes after
    reads = StatusReads(ctx.app.store)
    with reads.uow() as uow:
        repo = StatusReadRepository(uow.session)
        keys = info.partition_keys
        parts = [boards.Announced.of(p) for p in repo.board_partitions(
            info.id, keys, boards.ROWS, boards.READ_LIMIT)]
        done = repo.set_done(info.id, reads.now(), boards.READ_LIMIT)
        checks = repo.checks(info.id, boards.READ_LIMIT)
        derived = repo.derived_by(info.id, [eid for _, eid, _ in done])
        withdrawn = boards.withdrawals(repo.withdrawals(info.id, boards.WITHDRAWN_LIMIT))
    # The partitions came for the greatest first-key values among them; set-done and
    # late checks may push some of those off the board.
    rows = boards.pick_rows(keys[0], {p.values[0] for p in parts}, done, checks, withdrawn)
    shown = set(rows)
    parts = [p for p in parts if p.values[0] in shown]
    expectations = ctx.app.deadlines.expectations(info.db, info.name)
    grid = boards.build(info.partition_keys, rows, parts, done, checks, bool(expectations),
                        derived, withdrawn)
    # Per expectation, the instances late now (open checks), for the on-call reader.
    late_now: dict[str, list[CheckLine]] = {}
    for c in checks:
        if c.outcome == "late" and c.recovered_at is None:
            late_now.setdefault(c.expectation, []).append(c)
    return page(request, who, "board.html", table=info, board=grid, cursor=cursor,
                expectations=expectations, late_now=late_now,
                labels=boards.LABELS, max_rows=boards.ROWS,
                max_columns=boards.COLUMNS, rules=ctx.app.rules.rules(info.qualified))


@router.get("/tables/{table}/events")
@timed
def events(
    request: Request, table: str, ctx: Ctx,
    type_: Annotated[str, Query(alias="type", max_length=40)] = "",
    spec_: Annotated[str, Query(alias="spec", max_length=2000)] = "",
    since: Annotated[str, Query(max_length=40)] = "",
    before: Annotated[int | None, Query(ge=1, le=MAX_INT64)] = None,
) -> Response:
    who = viewer(request, ctx)
    if who is None:
        return to_sign_in(request)
    info = table_info(ctx, table)
    if type_ and type_ not in EVENT_TYPES:
        raise ApiProblem(422, "invalid-input", "Invalid input",
                         f"query.type: {type_[:40]!r} is not one of {', '.join(EVENT_TYPES)}",
                         field="query.type")
    wanted = wanted_spec(info, spec_, full=False, field="query.spec") if spec_ else None
    since_at = _since(since)
    with StatusReads(ctx.app.store).uow() as uow:
        rows = StatusReadRepository(uow.session).events(
            info.id, type_ or None, since_at, before, EVENTS_PAGE)
    lines = [(e, _spec_of(e.body), _derived_rule(e.body)) for e in rows]
    if wanted is not None:
        lines = [(e, s, r) for e, s, r in lines if any(_related(wanted, x) for x in s)]
    older = rows[-1].event_id if len(rows) == EVENTS_PAGE else None
    return page(request, who, "events.html", table=info, lines=lines, type=type_, spec=spec_,
                since=since, types=EVENT_TYPES, older=older)


def _since(raw: str) -> float | None:
    from datetime import UTC, datetime

    if not raw.strip():
        return None
    try:
        at = datetime.fromisoformat(raw.strip())
    except ValueError as exc:
        raise ApiProblem(422, "invalid-input", "Invalid input",
                         f"query.since: {raw[:40]!r} is not a date-time like "
                         "2026-11-25T08:00 (UTC)", field="query.since") from exc
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


def _derived_rule(body: str) -> str:
    """The rule that derived a set-done (its ``derivedFrom``), or ''."""
    try:
        why = json.loads(body).get("derivedFrom")
    except (ValueError, AttributeError):
        return ""
    return str(why.get("rule", "")) if isinstance(why, dict) else ""


def _spec_of(body: str) -> list[dict[str, str]]:
    try:
        msg = decode(body)
    except MalformedMessageError:
        return []
    parts = getattr(msg, "partitions", None)
    if parts is not None:
        return list(parts)
    one = getattr(msg, "partition_spec", None)
    # A COMMITS_MISSED names commits, not partitions (it was a 500 for the whole page).
    return [dict(one)] if one is not None else []


def _related(wanted: spec.Spec, values: dict[str, str]) -> bool:
    return all(values.get(k, v) == v for k, v in wanted.items())


@router.get("/tables/{table}/events/{event_id}.json")
def event_json(request: Request, table: str,
               event_id: Annotated[int, Path(ge=0, le=MAX_INT64)], ctx: Ctx) -> Response:
    who = viewer(request, ctx)
    if who is None:
        return to_sign_in(request)
    info = table_info(ctx, table)
    with StatusReads(ctx.app.store).uow() as uow:
        body = StatusReadRepository(uow.session).event(info.id, event_id)
    if body is None:
        raise ApiProblem(404, "not-found", "Not found",
                         f"path.event_id: table {info.qualified} has no event {event_id}",
                         field="path.event_id")
    return Response(json.dumps(json.loads(body), indent=2), media_type="application/json")


@router.get("/tables/{table}/stream")
async def stream(request: Request, table: str, ctx: Ctx,
                 last_event_id: Annotated[int | None, Query(ge=0, le=MAX_INT64)] = None,
                 ) -> Response:
    who = await run_in_threadpool(viewer, request, ctx)
    if who is None:
        raise ApiProblem(401, "unauthorized", "Unauthorized",
                         "cookie.pn_ui_token: sign in at /ui/sign-in first")
    raw = request.headers.get("last-event-id", "").strip()
    # The API's parse: an id past 64 bits was a 200 whose stream died on its first read.
    field = "header.Last-Event-ID" if raw else "query.last_event_id"
    cursor = _event_id(raw, field) if raw else last_event_id
    info = await run_in_threadpool(table_info, ctx, table)
    if cursor is not None:  # 410 like the API's: a replay would skip the purged events
        await run_in_threadpool(_still_in_log, ctx, cursor, field, info.qualified)
    # Like the API's stream, re-asked while it runs: a revoked token's stream ends.
    token = cookie_token(request)
    still_allowed = (None if token is None
                     else lambda: ctx.http_store.authenticate(token) is not None)
    return EventSourceResponse(_events(ctx, info, cursor, still_allowed), ping=PING_SECONDS)
