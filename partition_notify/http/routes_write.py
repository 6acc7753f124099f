"""Writes: register (admin), announce and mark-done (write), idempotent by key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictBool,
    StrictInt,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)

from partition_notify.contract import (
    AddPartitionMessage,
    AnyMessage,
    SetDoneMessage,
    names,
    validate_topic,
)
from partition_notify.core import limits
from partition_notify.core.errors import (
    ConfigurationError,
    ConflictError,
    TableReadTimeout,
    ValidationError,
)
from partition_notify.http.auth import Principal, require_role
from partition_notify.http.common import message_json, table_info, table_json, table_ref
from partition_notify.http.context import HttpContext, context
from partition_notify.http.idempotency import IdempotencyKey, fingerprint, idempotent_write
from partition_notify.http.problems import ApiProblem, about, from_error
from partition_notify.store import TableInfo
from partition_notify.store.provider import InTxn

router = APIRouter(prefix="/v1", tags=["write"])
Writer = Annotated[Principal, Depends(require_role("write"))]
Admin = Annotated[Principal, Depends(require_role("admin"))]
Ctx = Annotated[HttpContext, Depends(context)]


def _spec_in(value: object) -> str | dict[str, object]:
    # One check with one message: a plain union would report one error per member. The
    # problem's detail appends the input itself (", got 5"): not named here a second time.
    if isinstance(value, str | dict):
        return value
    raise ValueError("a spec is a 'key=value/key=value' string or a JSON object of key to value")


#: A spec as the CLI takes it (``k=v/k=v``) or as a JSON object; values are
#: checked by the same code as the CLI's (contract.spec).
SpecIn = Annotated[
    str | dict[str, object],
    PlainValidator(_spec_in),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "examples": ["datestamp=20110228/region=us"]},
                {"type": "object", "additionalProperties": {"type": ["string", "integer"]}},
            ]
        }
    ),
]
MAX_PARTITIONS_PER_REQUEST = 10_000
#: Revisions and retention are BIGINT columns.
MAX_INT64 = 2**63 - 1


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RegisterBody(_Body):
    table: str = Field(description="db.table")
    partitionKeys: list[str] = Field(min_length=1, description="ordered partition keys")
    retentionSeconds: StrictInt | None = Field(
        None, gt=0, le=MAX_INT64 // 2, description="set-done retention"
    )
    topic: str | None = Field(None, description="explicit topic instead of the policy")
    location: str | None = None


class AnnounceBody(_Body):
    partitions: list[SpecIn] = Field(min_length=1, max_length=MAX_PARTITIONS_PER_REQUEST)
    locations: list[str | None] | None = Field(None, description="one per partition")
    revision: StrictInt | None = Field(None, ge=0, le=MAX_INT64)
    replace: StrictBool = Field(False, description="announce again (an overwrite)")

    @field_validator("locations")
    @classmethod
    def _one_location_each(cls, value: list[str | None] | None,
                           info: ValidationInfo) -> list[str | None] | None:
        # Checked here so the problem names body.locations, not the partitions.
        partitions = info.data.get("partitions")
        if value is not None and partitions is not None and len(value) != len(partitions):
            raise ValueError(f"{len(value)} locations for {len(partitions)} partitions "
                             "(one each, or none)")
        if value is not None and any(loc is not None and "\x00" in loc for loc in value):
            raise ValueError("a location contains a NUL character")
        return value


class SetDoneBody(_Body):
    spec: SpecIn = Field(description="partial spec: datestamp=20110228")
    revision: StrictInt | None = Field(None, ge=0, le=MAX_INT64)


@router.post("/tables", status_code=201, summary="Register a table (admin)")
def register(body: RegisterBody, _: Admin, ctx: Ctx) -> JSONResponse:
    db, name = table_ref(body.table, "body.table")
    keys = _checked_fields(f"{db}.{name}", body.partitionKeys, body.retentionSeconds,
                           body.topic, body.location)
    if _exists(ctx, db, name):  # a repeat: compared without a write
        with about("body.table"):
            _same_as_stored(ctx.app.publisher.table(db, name), body, keys)
    with about("body"):
        info, created = ctx.app.publisher.register_table_created(
            db, name, body.partitionKeys, retention_seconds=body.retentionSeconds,
            topic=body.topic, location=body.location, change_existing=False,
        )
    # The catalog's answer: concurrent registrations of a new table all found none and
    # one created it; the others get the winner's table, unchanged, and answer as a
    # sequential repeat would (200, or 409 naming the first field that differs).
    if not created:
        _same_as_stored(info, body, keys)
    return JSONResponse(table_json(info), status_code=201 if created else 200)


def _checked_fields(what: str, keys: list[str] | None, retention: int | None,
                    topic: str | None, location: str | None) -> tuple[str, ...] | None:
    """The keys, normalised; each field is checked under its own name first, by the
    checks the publisher runs again: its one call could name only the whole body."""
    checked = None
    if keys is not None:
        with about("body.partitionKeys"):
            checked = names.partition_keys(keys)
    if retention is not None:
        with about("body.retentionSeconds"):
            limits.retention_seconds(retention, what=what)
    if topic:  # "" asks for the policy's topic
        with about("body.topic"):
            validate_topic(topic)
    if location is not None:
        with about("body.location"):
            limits.location(location, field=f"location of {what}")
    return checked


class AlterBody(_Body):
    partitionKeys: list[str] | None = Field(
        None, min_length=1, description="only while the table has no partition or set-done")
    retentionSeconds: StrictInt | None = Field(
        None, gt=0, le=MAX_INT64 // 2, description="for set-done rows saved from now on")
    topic: str | None = Field(None, description="for messages logged from now on")
    location: str | None = Field(None, description='"" clears it')


@router.patch("/tables/{table}", summary="Change a registered table (admin)")
def alter(table: str, body: AlterBody, _: Admin, ctx: Ctx) -> JSONResponse:
    db, name = table_ref(table)
    with about("path.table"):
        ctx.app.publisher.table(db, name)
    _checked_fields(f"{db}.{name}", body.partitionKeys, body.retentionSeconds, body.topic,
                    body.location)
    with about("body.location"):
        ctx.app.check_followed_location(db, name, body.location)
    try:
        # The app's alter: it also refuses new keys under a completeness rule.
        info = ctx.app.alter_table(
            db, name, partition_keys=body.partitionKeys, topic=body.topic,
            location=body.location, retention_seconds=body.retentionSeconds)
    except (ConflictError, ValidationError) as exc:  # new keys: in use, or not the
        raise from_error(exc, "body.partitionKeys") from exc  # followed table's fields
    except (ConfigurationError, TableReadTimeout) as exc:  # the followed table's catalog
        raise ApiProblem(503, "table-unreadable", "Table cannot be read",  # or log
                         " ".join(str(exc).split()), field="body.partitionKeys") from exc
    return JSONResponse(table_json(info))


@router.delete("/tables/{table}", summary="Unregister a table (admin)")
def unregister(table: str, _: Admin, ctx: Ctx) -> JSONResponse:
    db, name = table_ref(table)
    with about("path.table"):
        info, partitions, set_done = ctx.app.unregister_table(db, name)
    return JSONResponse({**table_json(info), "removedPartitions": partitions,
                         "removedSetDone": set_done})


def _same_as_stored(info: TableInfo, body: RegisterBody, keys: tuple[str, ...] | None) -> None:
    """Registering again is idempotent: what differs from the stored table is a 409
    naming the first field that differs (the detail lists them all)."""
    differ = [
        (field, f"{what} {stored!r} (asked {asked!r})")
        for field, what, stored, asked in (
            ("partitionKeys", "partition keys", list(info.partition_keys),
             None if keys is None else list(keys)),
            ("topic", "topic", info.topic, body.topic or None),
            ("retentionSeconds", "retentionSeconds", info.retention_seconds,
             body.retentionSeconds),
            ("location", "location", info.location, body.location),
        )
        if asked is not None and asked != stored
    ]
    if differ:
        exc = ConflictError(f"table {info.qualified} is registered with "
                            + ", ".join(text for _, text in differ)
                            + "; registering does not change a table")
        raise from_error(exc, f"body.{differ[0][0]}") from None


def _exists(ctx: HttpContext, db: str, name: str) -> bool:
    return bool(ctx.app.store.catalog.find_tables([(db, name)]))


@router.post(
    "/tables/{table}/partitions",
    status_code=201,
    summary="Announce partitions",
    description="One ADD_PARTITION message per new partition; ones already announced are "
    "skipped (counted in `skipped`) unless `replace`.",
)
def announce(
    table: str, body: AnnounceBody, request: Request, who: Writer, ctx: Ctx,
    key: IdempotencyKey = None,
) -> JSONResponse:
    info = table_info(ctx, table)
    fp = fingerprint(who, "POST", request.url.path, body.model_dump(mode="json"))

    def write(in_txn: InTxn) -> object:
        with about("body.partitions"):
            return ctx.app.publisher.announce_partitions(
                info.db, info.name, body.partitions, locations=body.locations,
                revision=body.revision, replace=body.replace, in_txn=in_txn,
            )

    def render(messages: Sequence[AnyMessage]) -> dict[str, object]:
        sent = [m for m in messages if isinstance(m, AddPartitionMessage)]
        return {
            "table": info.qualified,
            "announced": [message_json(m) for m in sent],
            "skipped": len(body.partitions) - len(sent),
        }

    return idempotent_write(ctx, who, key, fp, write, render)


@router.post("/tables/{table}/set-done", status_code=201, summary="Mark a partial spec done")
def mark_done(
    table: str, body: SetDoneBody, request: Request, who: Writer, ctx: Ctx,
    key: IdempotencyKey = None,
) -> JSONResponse:
    info = table_info(ctx, table)
    fp = fingerprint(who, "POST", request.url.path, body.model_dump(mode="json"))

    def write(in_txn: InTxn) -> object:
        with about("body.spec"):
            return ctx.app.publisher.send_mark_set_done(
                info.db, info.name, body.spec, revision=body.revision, in_txn=in_txn
            )

    def render(messages: Sequence[AnyMessage]) -> dict[str, object]:
        done = [m for m in messages if isinstance(m, SetDoneMessage)]
        return {"table": info.qualified, "setDone": message_json(done[0])}

    return idempotent_write(ctx, who, key, fp, write, render)
