"""Expectations (partition deadlines) over HTTP: the same ``app.deadlines`` API as the CLI."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from partition_notify.core.errors import ConflictError, ValidationError
from partition_notify.deadlines.api import Deadlines
from partition_notify.deadlines.schedule import VARIABLES
from partition_notify.http.auth import Principal, require_role
from partition_notify.http.common import table_info
from partition_notify.http.context import HttpContext, context
from partition_notify.http.problems import about, from_error

router = APIRouter(prefix="/v1", tags=["deadlines"])
Reader = Annotated[Principal, Depends(require_role("read"))]
Writer = Annotated[Principal, Depends(require_role("write"))]
Ctx = Annotated[HttpContext, Depends(context)]


class ExpectationBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="unique per table, e.g. daily")
    specTemplate: str = Field(
        description="partial spec with {{ variables }}, e.g. datestamp={{ ds_nodash }}; "
        f"variables: {', '.join(VARIABLES)}"
    )
    cron: str = Field(description="5-field crontab of logical dates, e.g. '0 0 * * *'")
    timezone: str = Field("UTC", description="IANA time zone of the cron")
    deadline: str = Field(description="local HH:MM after the interval end, or an "
                          "offset from +1s to +744h (+6h)")


def _deadlines(ctx: HttpContext) -> Deadlines:
    return ctx.app.deadlines


@router.get("/tables/{table}/expectations", summary="Expectations of a table")
def list_expectations(table: str, _: Reader, ctx: Ctx) -> dict[str, object]:
    info = table_info(ctx, table)
    views = _deadlines(ctx).expectations(info.db, info.name)
    return {"table": info.qualified, "expectations": [v.to_json() for v in views]}


@router.post("/tables/{table}/expectations", status_code=201, summary="Declare an expectation")
def add_expectation(table: str, body: ExpectationBody, _: Writer, ctx: Ctx) -> JSONResponse:
    info = table_info(ctx, table)
    try:
        view = _deadlines(ctx).add(
            info.db, info.name, name=body.name, spec_template=body.specTemplate,
            cron=body.cron, timezone=body.timezone, deadline=body.deadline,
        )
    except ConflictError as exc:  # an expectation of that name exists
        raise from_error(exc, "body.name") from exc
    except ValidationError as exc:
        raise from_error(exc, field_of(str(exc))) from exc
    return JSONResponse(view.to_json(), status_code=201)


#: How Deadlines.add's messages start (deadlines/api.py, schedule.py, cron.py), and
#: the field each names; ``add`` checks them all in one call.
_FIELDS = (("expectation name ", "body.name"), ("spec template ", "body.specTemplate"),
           ("schedule ", "body.cron"), ("time zone ", "body.timezone"),
           ("deadline ", "body.deadline"))


def field_of(message: str) -> str:
    return next((field for start, field in _FIELDS if message.startswith(start)), "body")


@router.get(
    "/tables/{table}/expectations/{name}",
    summary="An expectation and its latest verdicts (on_time, done_late, late)",
)
def get_expectation(table: str, name: str, _: Reader, ctx: Ctx) -> dict[str, object]:
    info = table_info(ctx, table)
    d = _deadlines(ctx)
    with about("path.name"):
        verdicts = d.status(info.db, info.name, name)
    view = next(v for v in d.expectations(info.db, info.name) if v.name == name)
    return {**view.to_json(), "verdicts": verdicts}


@router.delete("/tables/{table}/expectations/{name}", summary="Remove an expectation")
def remove_expectation(table: str, name: str, _: Writer, ctx: Ctx) -> dict[str, object]:
    info = table_info(ctx, table)
    with about("path.name"):
        return _deadlines(ctx).remove(info.db, info.name, name).to_json()


@router.get("/tables/{table}/late", summary="Instances late and not yet done")
def late(table: str, _: Reader, ctx: Ctx) -> dict[str, object]:
    from partition_notify.deadlines.api import check_json

    info = table_info(ctx, table)
    rows = _deadlines(ctx).open_late(info.db, info.name)
    return {"table": info.qualified, "late": [check_json(c) for c in rows]}
