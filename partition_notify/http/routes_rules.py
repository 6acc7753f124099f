"""Completeness rules over HTTP (admin): the same ``app.rules`` API as the CLI."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from partition_notify.core.errors import NotFoundError, ValidationError
from partition_notify.http.auth import Principal, require_role
from partition_notify.http.common import table_info
from partition_notify.http.context import HttpContext, context
from partition_notify.http.problems import about, from_error
from partition_notify.rules.api import Rules
from partition_notify.rules.kinds import KINDS

router = APIRouter(prefix="/v1", tags=["rules"])
Reader = Annotated[Principal, Depends(require_role("read"))]
# Rules publish set-dones on the table's behalf: adding or removing one is an admin's act.
Admin = Annotated[Principal, Depends(require_role("admin"))]
Ctx = Annotated[HttpContext, Depends(context)]
#: "rule <field> <value>: expected ..." (partition_notify.rules.kinds) names the culprit.
_FIELD = re.compile(r"rule (\w+) ")
_TOP_LEVEL = {"kind", "name"}


class RuleBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="unique per table, e.g. regions")
    kind: str = Field(description=f"one of {', '.join(KINDS)}")
    params: dict[str, object] = Field(
        default_factory=dict,
        description="all-of: key, values, by; calendar: key, keyFormat, into, intoFormat, "
        "timezone; cross-table: inputs, by; quiet: by, quietSeconds; every kind: inputs "
        "(default: this table)")
    fromNow: StrictBool = Field(False, description="ignore the retained history")


class DryRunBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: str = Field(description=f"one of {', '.join(KINDS)}")
    params: dict[str, object] = Field(default_factory=dict)


def _rules(ctx: HttpContext) -> Rules:
    return ctx.app.rules


def _field(exc: ValidationError | NotFoundError) -> str:
    if isinstance(exc, NotFoundError):  # the path's table was found: an input table was not
        return "body.params.inputs"
    m = _FIELD.match(str(exc))
    if m is None:
        return "body"
    return f"body.{m.group(1)}" if m.group(1) in _TOP_LEVEL else f"body.params.{m.group(1)}"


@router.get("/tables/{table}/rules", summary="Completeness rules of a table")
def list_rules(table: str, _: Reader, ctx: Ctx) -> dict[str, object]:
    info = table_info(ctx, table)
    views = _rules(ctx).rules(info.qualified)
    return {"table": info.qualified, "rules": [v.to_json() for v in views]}


@router.post("/tables/{table}/rules", status_code=201, summary="Add a completeness rule")
def add_rule(table: str, body: RuleBody, _: Admin, ctx: Ctx) -> JSONResponse:
    info = table_info(ctx, table)
    try:
        view = _rules(ctx).add(info.qualified, name=body.name, kind=body.kind,
                               params=body.params, from_now=body.fromNow)
    except (ValidationError, NotFoundError) as exc:
        raise from_error(exc, _field(exc)) from exc
    return JSONResponse(view.to_json(), status_code=201)


@router.delete("/tables/{table}/rules/{name}", summary="Remove a completeness rule")
def remove_rule(table: str, name: str, _: Admin, ctx: Ctx) -> dict[str, object]:
    info = table_info(ctx, table)
    with about("path.name"):
        return _rules(ctx).remove(info.qualified, name).to_json()


@router.get("/tables/{table}/rules/{name}/dry-run",
            summary="What a stored rule would have derived over the retained log")
def dry_run_stored(table: str, name: str, _: Reader, ctx: Ctx) -> dict[str, object]:
    info = table_info(ctx, table)
    with about("path.name"):
        return _rules(ctx).dry_run(info.qualified, name=name)


@router.post("/tables/{table}/rules/dry-run",
             summary="What a rule definition would have derived; nothing is stored")
def dry_run_definition(table: str, body: DryRunBody, _: Reader, ctx: Ctx) -> dict[str, object]:
    info = table_info(ctx, table)
    try:
        return _rules(ctx).dry_run(info.qualified, kind=body.kind, params=body.params)
    except (ValidationError, NotFoundError) as exc:
        raise from_error(exc, _field(exc)) from exc
