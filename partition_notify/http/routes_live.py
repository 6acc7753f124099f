"""Long-poll waits and Server-Sent Events streams, fed by the event hub."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.concurrency import run_in_threadpool

from partition_notify.contract import SetDoneMessage, spec
from partition_notify.core.limits import MAX_INT64
from partition_notify.http.auth import Principal, require_role
from partition_notify.http.common import table_info, wanted_spec
from partition_notify.http.context import HttpContext, context
from partition_notify.http.hub import HubEvent
from partition_notify.http.problems import ApiProblem
from partition_notify.store import TableInfo

router = APIRouter(prefix="/v1", tags=["live"])
Reader = Annotated[Principal, Depends(require_role("read"))]
Ctx = Annotated[HttpContext, Depends(context)]
#: Events a slow stream client may fall behind before it is cut off; it then
#: reconnects with Last-Event-ID and catches up from the log.
STREAM_BUFFER = 10_000
REPLAY_PAGE = 500
PING_SECONDS = 15


@router.get(
    "/tables/{table}/wait",
    summary="Long-poll until a set-done covers the spec",
    description="200 with the covering set-done (at once if one exists), or **204 No "
    "Content** when `timeout` seconds pass without one. A coarser set-done covers a finer "
    "spec. `timeout` is capped by PN_HTTP_WAIT_MAX_SECONDS.",
    responses={204: {"description": "timed out, nothing covers the spec yet"}},
)
async def wait(
    table: str,
    request: Request,
    _: Reader,
    ctx: Ctx,
    spec_: Annotated[str, Query(alias="spec", description="partial or full spec")],
    timeout: Annotated[float, Query(ge=0, allow_inf_nan=False, description="seconds")] = 30.0,
) -> Response:
    limit = ctx.settings.http_wait_max_seconds
    if timeout > limit:
        raise ApiProblem(
            422, "invalid-input", "Invalid input",
            f"query.timeout: {timeout:g} s is more than the server's maximum {limit:g} s "
            "(PN_HTTP_WAIT_MAX_SECONDS)",
            field="query.timeout",
        )
    info, wanted = await run_in_threadpool(_resolve, ctx, table, spec_)
    loop = asyncio.get_running_loop()
    found: asyncio.Future[str | None] = loop.create_future()

    def on_event(event: HubEvent | None) -> None:
        if found.done():
            return
        if event is None:
            found.set_result(None)
            return
        msg = event.message() if event.event_type == "PARTITION_DONE" else None
        if isinstance(msg, SetDoneMessage) and spec.covers(msg.partition_spec, wanted):
            found.set_result(event.body)

    close = ctx.hub.listen(info.qualified, on_event)  # 1. listen, 2. then read the store
    ctx.waits.inc()
    try:
        # The newest retained one: a set done again carries the newer revision.
        retained = await run_in_threadpool(
            ctx.app.store.retention.newest_covering, info, spec.covering_specs(wanted)
        )
        if retained is not None:
            return _json(retained)
        if not await _until_found_or_gone(found, request, timeout):
            # Timed out, or the client left: either way the slot and waiter go now.
            return Response(status_code=204)
        body = found.result()
        if body is None:
            raise ApiProblem(503, "shutting-down", "Shutting down", "the server is stopping")
        return _json(body)
    finally:
        close()
        ctx.waits.dec()


async def _until_found_or_gone(found: asyncio.Future[str | None], request: Request,
                               timeout: float) -> bool:
    """Whether ``found`` completed within ``timeout`` while the client stayed connected.

    Without the race, a client that left held its stream slot (PN_HTTP_MAX_STREAMS)
    and its waiter for the whole timeout, up to PN_HTTP_WAIT_MAX_SECONDS. A GET has
    no body, so the next ASGI message is the server's ``http.disconnect``.
    """
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((found, gone), timeout=timeout,
                           return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    return found.done()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass  # the (empty) request body; the disconnect follows


def _event_id(raw: str, field: str) -> int:
    """An event id from outside: ASCII digits (not '²'), at most a signed 64-bit integer."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > len(str(MAX_INT64)) \
            or int(raw) > MAX_INT64:
        raise ApiProblem(
            422, "invalid-input", "Invalid input",
            f"{field}: expected an event id (a non-negative integer up to {MAX_INT64}), "
            f"got {raw[:40]!r}",
            field=field,
        )
    return int(raw)


def _json(body: str) -> Response:
    # The stored body is the message's JSON already: no parse and re-encode per waiter.
    return Response(body, media_type="application/json")


def _resolve(ctx: HttpContext, table: str, raw: str) -> tuple[TableInfo, spec.Spec]:
    info = table_info(ctx, table)
    return info, wanted_spec(info, raw, full=False, field="query.spec")


@router.get(
    "/tables/{table}/stream",
    summary="Server-Sent Events: the table's messages, replayed then live",
    description="Each SSE event has `id:` = the message's eventId, `event:` = its HCAT_EVENT "
    "and `data:` = its JSON body. With `Last-Event-ID` (header, or `last_event_id` for the "
    "first connection) the server first replays every message of the table after that id "
    "from the event log, then follows live: each message once, in event-id order. Without "
    "one, the stream starts live.",
    response_class=EventSourceResponse,
)
async def stream(
    table: str,
    request: Request,
    who: Reader,
    ctx: Ctx,
    last_event_id_header: Annotated[
        str | None, Header(alias="Last-Event-ID", description="resume after this event id")
    ] = None,
    last_event_id: Annotated[int | None, Query(ge=0, le=MAX_INT64)] = None,
) -> EventSourceResponse:
    cursor = last_event_id
    field = "query.last_event_id"
    if last_event_id_header is not None and last_event_id_header.strip():
        field = "header.Last-Event-ID"
        cursor = _event_id(last_event_id_header.strip(), field)
    info = await run_in_threadpool(table_info, ctx, table)
    if cursor is not None:
        await run_in_threadpool(_still_in_log, ctx, cursor, field, info.qualified)
    still_allowed = None if who.anonymous else _token_check(ctx, request)
    return EventSourceResponse(_events(ctx, info, cursor, still_allowed), ping=PING_SECONDS)


def _still_in_log(ctx: HttpContext, cursor: int, field: str, table: str) -> None:
    """410 when events after ``cursor`` may have been purged from the log
    (docs/reliability.md#retention), 409 when it is past the log's end: a replay
    would skip events silently."""
    below = ctx.app.store.housekeeping.purged_below()
    if cursor + 1 < below:
        raise ApiProblem(
            410, "events-purged", "Gone",
            f"events after {cursor} may have been purged (the log keeps event ids from "
            f"{below} on): re-read the table's state (GET /v1/tables/{table}/set-done) "
            "and resume without a cursor",
            field=field,
        )
    top = ctx.app.store.log.max_event_id()
    if cursor > top:
        # Ids never go down (the purge keeps each topic's last event): this cursor is
        # another store's, or one recreated since; followed, it would skip events silently.
        raise ApiProblem(
            409, "cursor-ahead", "Conflict",
            f"cursor {cursor} is past the event log's last id {top}: it is not from this "
            "store (or the store was recreated); re-read the table's state (GET "
            f"/v1/tables/{table}/set-done) and reconnect with ?last_event_id=0 or without one",
            field=field,
        )


def _token_check(ctx: HttpContext, request: Request) -> Callable[[], bool]:
    """Whether the stream's token is still live (not revoked) — asked again while it runs."""
    token = request.headers.get("authorization", "").strip().partition(" ")[2].strip()
    return lambda: ctx.http_store.authenticate(token) is not None


async def _events(ctx: HttpContext, info: TableInfo, cursor: int | None,
                  still_allowed: Callable[[], bool] | None = None,
                  ) -> AsyncIterator[ServerSentEvent]:
    """Listen first, then replay from the log after ``cursor``, then live; dedupe by id.

    A stream is one request, but revocation must reach it too: every
    PN_HTTP_STREAM_AUTH_RECHECK_SECONDS the token is checked again and the
    stream ends once it is revoked.
    """
    recheck = ctx.settings.http_stream_auth_recheck_seconds
    queue: asyncio.Queue[HubEvent | None] = asyncio.Queue(STREAM_BUFFER)

    def on_event(event: HubEvent | None) -> None:
        try:
            queue.put_nowait(event)
        except asyncio.QueueFull:
            close()  # cut the slow client off; it resumes from the log
            queue.get_nowait()
            queue.put_nowait(None)

    close = ctx.hub.listen(info.qualified, on_event)
    last = ctx.hub.cursor if cursor is None else cursor
    replay = cursor is not None
    ctx.streams.inc()
    try:
        while replay:
            page = await run_in_threadpool(
                ctx.http_store.events_of_table_after, info.id, last, REPLAY_PAGE
            )
            for event_id, event_type, body in page:
                yield ServerSentEvent(data=body, id=str(event_id), event=event_type)
                last = event_id
            replay = len(page) == REPLAY_PAGE
        loop = asyncio.get_running_loop()
        checked = loop.time()
        while True:
            if loop.time() - checked >= recheck:  # busy or idle, the token is asked again
                if still_allowed is not None and not await run_in_threadpool(still_allowed):
                    return
                checked = loop.time()
            try:
                event = await asyncio.wait_for(queue.get(), checked + recheck - loop.time())
            except TimeoutError:
                continue
            if event is None:
                return
            if event.event_id <= last:
                continue  # already replayed
            yield ServerSentEvent(data=event.body, id=str(event.event_id), event=event.event_type)
            last = event.event_id
    finally:
        close()
        ctx.streams.dec()
