"""Operator actions on followed Iceberg/Delta tables (admin): skip the one commit the
follower is stopped on (writers/lakehouse/skip.py; the CLI's ``lakehouse skip``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import Field, StrictInt

from partition_notify.contract import AnyMessage, CommitsMissedMessage
from partition_notify.core.errors import ConflictError, ValidationError
from partition_notify.core.limits import MAX_INT64
from partition_notify.http.auth import Principal, require_role
from partition_notify.http.common import message_json, table_info
from partition_notify.http.context import HttpContext, context
from partition_notify.http.idempotency import IdempotencyKey, fingerprint, idempotent_write
from partition_notify.http.problems import from_error
from partition_notify.http.routes_write import _Body
from partition_notify.store.provider import InTxn
from partition_notify.writers.lakehouse.skip import first_skipped, skip

router = APIRouter(prefix="/v1", tags=["operations"])
Admin = Annotated[Principal, Depends(require_role("admin"))]
Ctx = Annotated[HttpContext, Depends(context)]


class SkipBody(_Body):
    version: StrictInt = Field(
        ge=0,
        le=MAX_INT64,
        description="the commit the follower is stopped on: Delta version or Iceberg snapshot id",
    )


@router.post(
    "/tables/{table}/lakehouse/skip",
    status_code=201,
    summary="Skip the commit a followed table is stopped on (admin)",
    description="Only the commit the table's follower is stopped on (it cannot announce "
    "it, or the one it resumes at when it cannot load the table at its cursor) is skipped; "
    "any other is a 409 naming that commit, as is a table stopped with nothing to skip "
    "to. One COMMITS_MISSED goes out in its place, the skip is recorded with the caller "
    "on the /ui operations page, and "
    "the follower goes on with the next commit.",
)
def skip_commit(
    table: str,
    body: SkipBody,
    request: Request,
    who: Admin,
    ctx: Ctx,
    key: IdempotencyKey = None,
) -> JSONResponse:
    info = table_info(ctx, table)
    fp = fingerprint(who, "POST", request.url.path, body.model_dump(mode="json"))

    def write(in_txn: InTxn) -> object:
        try:
            return skip(ctx.app.publisher, info, body.version, principal=who.name, in_txn=in_txn)
        except ValidationError as exc:  # not followed at all: the table is wrong
            raise from_error(exc, "path.table") from exc
        except ConflictError as exc:  # stopped on another commit, or on none
            raise from_error(exc, "body.version") from exc

    def render(messages: Sequence[AnyMessage]) -> dict[str, object]:
        (msg,) = [m for m in messages if isinstance(m, CommitsMissedMessage)]
        return {
            "table": info.qualified,
            "format": msg.table_format,
            "skipped": msg.revision,
            # The oldest commit skipped: a skip to where the table resumes covers every
            # version after the cursor up to "skipped".
            "skippedFrom": None if msg.revision is None
            else first_skipped(msg.table_format, msg.after_revision, msg.revision),
            "afterRevision": msg.after_revision,
            "commitsMissed": message_json(msg),
        }

    return idempotent_write(ctx, who, key, fp, write, render)
