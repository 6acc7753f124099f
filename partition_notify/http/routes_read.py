"""Reads: tables, partitions, set-done history and coverage."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Depends, Query

from partition_notify.contract import spec
from partition_notify.core.limits import MAX_INT64
from partition_notify.http.auth import Principal, require_role
from partition_notify.http.common import table_info, table_json, wanted_spec
from partition_notify.http.context import HttpContext, context

router = APIRouter(prefix="/v1", tags=["read"])
Reader = Annotated[Principal, Depends(require_role("read"))]
Ctx = Annotated[HttpContext, Depends(context)]

#: Set-done rows one history read answers by default, and at most (``limit``).
HISTORY_PAGE = 1000
MAX_HISTORY_PAGE = 10_000


@router.get("/tables", summary="Registered tables")
def list_tables(_: Reader, ctx: Ctx) -> dict[str, object]:
    return {"tables": [table_json(t) for t in ctx.app.store.catalog.tables()]}


@router.get("/tables/{table}", summary="One table")
def get_table(table: str, _: Reader, ctx: Ctx) -> dict[str, object]:
    return table_json(table_info(ctx, table))


@router.get(
    "/tables/{table}/partitions/{partition:path}",
    summary="Is a partition present (announced)?",
    description="`partition` is a full spec, `k=v/k=v`; a value's own `/` or `%` is "
    "Hive-escaped (`%2F`, `%25`) and that escape percent-encoded in the URL (`%252F`).",
)
def get_partition(table: str, partition: str, _: Reader, ctx: Ctx) -> dict[str, object]:
    info = table_info(ctx, table)
    s = wanted_spec(info, partition, full=True, field="path.partition")
    found = ctx.app.store.catalog.partition(info, spec.canonical(s))
    out: dict[str, object] = {"table": info.qualified, "spec": spec.canonical(s)}
    if found is None:
        return {**out, "present": False}
    return {
        **out,
        "present": True,
        "values": found.values,
        "location": found.location,
        "revision": found.revision,
        "eventId": found.event_id,
        "createdAt": found.created_at,
    }


@router.get(
    "/tables/{table}/set-done",
    summary="Retained set-done history",
    description="Oldest first, in pages of at most `limit` "
    f"(default {HISTORY_PAGE}, at most {MAX_HISTORY_PAGE}). `since` (epoch seconds) and "
    "`since_event_id` (exclusive) filter it. `next` holds the query parameter that reads "
    "the following page; null when a page comes back short (the end).",
)
def set_done_history(
    table: str,
    _: Reader,
    ctx: Ctx,
    since: Annotated[float | None, Query(ge=0, allow_inf_nan=False)] = None,
    since_event_id: Annotated[int | None, Query(ge=0, le=MAX_INT64)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_HISTORY_PAGE)] = HISTORY_PAGE,
) -> dict[str, object]:
    info = table_info(ctx, table)
    bodies, last = ctx.app.store.retention.set_done_page(
        info, since or 0.0, since_event_id or 0, limit)
    return {"table": info.qualified, "setDone": [json.loads(b) for b in bodies],
            "next": None if last is None else {"since_event_id": last}}


@router.get(
    "/tables/{table}/set-done/covering",
    summary="Is this spec done?",
    description="A set-done for any sub-spec covers it: `datestamp=X` done covers "
    "`datestamp=X/region=us`. Answers the newest covering set-done (a set done "
    "again, say re-run at a newer revision, answers with that one).",
)
def covering(
    table: str,
    _: Reader,
    ctx: Ctx,
    spec_: Annotated[str, Query(alias="spec", description="partial or full spec")],
) -> dict[str, object]:
    info = table_info(ctx, table)
    wanted = wanted_spec(info, spec_, full=False, field="query.spec")
    body = ctx.app.store.retention.newest_covering(info, spec.covering_specs(wanted))
    out: dict[str, object] = {"table": info.qualified, "spec": spec.canonical(wanted)}
    if body is None:
        return {**out, "done": False}
    return {**out, "done": True, "setDone": json.loads(body)}
