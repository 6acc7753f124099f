"""Withdraw a partition or a set (write role): ``PARTITION_WITHDRAWN``, idempotent by key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import Field, StrictInt, StrictStr, field_validator

from partition_notify.contract import AnyMessage, PartitionWithdrawnMessage
from partition_notify.contract.messages import MAX_REASON_CHARS
from partition_notify.core import limits
from partition_notify.core.errors import ValidationError
from partition_notify.http.auth import Principal, require_role
from partition_notify.http.common import message_json, table_info
from partition_notify.http.context import HttpContext, context
from partition_notify.http.idempotency import IdempotencyKey, fingerprint, idempotent_write
from partition_notify.http.problems import about
from partition_notify.http.routes_write import MAX_INT64, SpecIn, _Body
from partition_notify.store.provider import InTxn

router = APIRouter(prefix="/v1", tags=["write"])
Writer = Annotated[Principal, Depends(require_role("write"))]
Ctx = Annotated[HttpContext, Depends(context)]


class WithdrawBody(_Body):
    spec: SpecIn = Field(description="full or partial spec: datestamp=20110228/region=us")
    reason: StrictStr = Field(min_length=1, max_length=MAX_REASON_CHARS,
                              description="why, for consumers: 'bad data: ...'")
    revision: StrictInt | None = Field(None, ge=0, le=MAX_INT64)

    @field_validator("reason")
    @classmethod
    def _reason(cls, value: str) -> str:
        # The publisher's own checks (no NUL, not blank once stripped), here so that the
        # problem names body.reason rather than the spec the write is about.
        try:
            text = limits.text(value, field="reason")
        except ValidationError as exc:
            raise ValueError(str(exc)) from None
        if not text.strip():
            raise ValueError("must not be blank")
        return value


@router.post(
    "/tables/{table}/withdrawals", status_code=201,
    summary="Withdraw a partition or a set",
    description="One PARTITION_WITHDRAWN: the partitions the spec matches are removed, "
    "retained set-dones sharing a partition with it no longer count (is-set-done and wait "
    "answer not done), and completeness rules retract what they derived from it "
    "(PARTITION_DONE_RETRACTED, published by serve). Restate by announcing again and "
    "marking the set done again.",
)
def withdraw(
    table: str, body: WithdrawBody, request: Request, who: Writer, ctx: Ctx,
    key: IdempotencyKey = None,
) -> JSONResponse:
    info = table_info(ctx, table)
    fp = fingerprint(who, "POST", request.url.path, body.model_dump(mode="json"))

    def write(in_txn: InTxn) -> object:
        with about("body.spec"):
            return ctx.app.publisher.withdraw(info.db, info.name, body.spec, reason=body.reason,
                                              revision=body.revision, in_txn=in_txn)

    def render(messages: Sequence[AnyMessage]) -> dict[str, object]:
        done = [m for m in messages if isinstance(m, PartitionWithdrawnMessage)]
        return {"table": info.qualified, "withdrawn": message_json(done[0])}

    return idempotent_write(ctx, who, key, fp, write, render)
