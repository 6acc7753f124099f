"""``/ui/ops`` (admin): dead letters (relay, Airflow push), damaged rows of the event
log (store/damaged_rows.py), relay status, Spark commits
applied, ignored and rejected (the HTTP route's refusals: writers/commit_refusals.py;
the spools': partition_notify/http/ui/spool.py); Iceberg/Delta commits operators skipped
(writers/lakehouse/skip.py); expectation forms.

Every POST re-checks the role, the origin and the CSRF token
(:func:`partition_notify.http.ui.session.check_admin_post`): hiding a button
from a read token is a courtesy, the refusal is here.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from partition_notify.core.errors import ConflictError, ValidationError
from partition_notify.core.limits import MAX_INT64
from partition_notify.http.common import table_info
from partition_notify.http.context import HttpContext, context
from partition_notify.http.problems import ApiProblem, about, from_error
from partition_notify.http.routes_deadlines import field_of
from partition_notify.http.ui import spool
from partition_notify.http.ui.reads import StatusReadRepository, StatusReads
from partition_notify.http.ui.render import page, to_sign_in
from partition_notify.http.ui.session import check_admin_post, is_admin, read_form, viewer
from partition_notify.metrics import SPARK_COMMIT_STATUSES
from partition_notify.store.damaged_rows import find_damaged
from partition_notify.store.dead_letters import DeadLetters
from partition_notify.store.log_headers import damaged_events
from partition_notify.store.push_letters import PushLetters
from partition_notify.writers.commit_refusals import CommitRefusals
from partition_notify.writers.lakehouse.skip import SKIPPED, skip
from partition_notify.writers.lakehouse.store import Followed, LakehouseTables

router = APIRouter(prefix="/ui", include_in_schema=False)
Ctx = Annotated[HttpContext, Depends(context)]
#: Dead letters and Spark commits shown (newest first).
SHOWN = 200


async def admin_form(request: Request, ctx: HttpContext) -> dict[str, str]:
    """The posted form, once the caller is an admin on a same-origin, CSRF-checked request."""
    form = await read_form(request)
    who = await run_in_threadpool(viewer, request, ctx)
    check_admin_post(request, who, form)
    return form


@router.get("/ops")
def ops(request: Request, ctx: Ctx) -> Response:
    who = viewer(request, ctx)
    if who is None:
        return to_sign_in(request)
    if not is_admin(who):
        raise ApiProblem(403, "forbidden", "Forbidden",
                         f"{who.name!r} has role {who.role!r}; /ui/ops needs 'admin'")
    letters = DeadLetters(ctx.app.store).find()[-SHOWN:][::-1]
    pushed = PushLetters(ctx.app.store).latest(SHOWN)
    with StatusReads(ctx.app.store).uow() as uow:
        commits = StatusReadRepository(uow.session).spark_commits(SHOWN)
    recorded = CommitRefusals(ctx.app.store).latest(SHOWN)
    # Operators' skips of Iceberg/Delta commits share the table (writers/lakehouse/skip.py).
    refused = [r for r in recorded if r.status != SKIPPED]
    skipped = [r for r in recorded if r.status == SKIPPED]
    stopped = _stopped_tables(ctx)
    s = ctx.settings
    set_aside = spool.set_aside(
        ctx.app.publisher, [d for d in s.spark_spool_dirs.split(",") if d.strip()],
        s.default_fs, ctx.http_store.signing_keys())
    samples = ctx.metrics.registry
    counts = {st: int(samples.get_sample_value("pn_spark_commits_total", {"status": st}) or 0)
              for st in SPARK_COMMIT_STATUSES}
    pending, age = ctx.app.store.log.relay_lag()
    return page(request, who, "ops.html", letters=letters, pushed=pushed, commits=commits,
                refused=refused, skipped=skipped, stopped=stopped, set_aside=set_aside,
                counts=counts, damaged=find_damaged(ctx.app.store, SHOWN),
                damaged_here=damaged_events(), shown=SHOWN,
                relay_pending=pending, relay_age=age, done=request.query_params.get("done"))


def _stopped_tables(ctx: HttpContext) -> list[tuple[str, Followed]]:
    """Followed tables stopped on a commit their follower cannot announce, by name."""
    found = LakehouseTables(ctx.app.store).stopped(SHOWN)
    names = ctx.app.store.catalog.tables_by_id(f.table_id for f in found)
    return [(names[f.table_id].qualified, f) for f in found if f.table_id in names]


@router.post("/ops/dead-letters")
async def dead_letters(request: Request, ctx: Ctx) -> Response:
    form = await admin_form(request, ctx)
    action, event_id = _letter_action(form)
    letters = DeadLetters(ctx.app.store)
    with about("form.event_id"):
        fn = letters.redrive if action == "redrive" else letters.discard
        await run_in_threadpool(fn, [event_id])
    return RedirectResponse(f"/ui/ops?done={action}+{event_id}", status_code=303)


@router.post("/ops/push-letters")
async def push_letters(request: Request, ctx: Ctx) -> Response:
    """The Airflow push sink's dead letters: redriven ones are sent on its next run."""
    form = await admin_form(request, ctx)
    action, event_id = _letter_action(form)
    letters = PushLetters(ctx.app.store)
    with about("form.event_id"):
        fn = letters.redrive if action == "redrive" else letters.discard
        await run_in_threadpool(fn, [event_id])
    return RedirectResponse(f"/ui/ops?done=push+{action}+{event_id}", status_code=303)


@router.post("/ops/lakehouse-skip")
async def lakehouse_skip(request: Request, ctx: Ctx) -> Response:
    """Skip the commit a followed table is stopped on, as ``lakehouse skip`` does."""
    form = await read_form(request)
    who = await run_in_threadpool(viewer, request, ctx)
    check_admin_post(request, who, form)
    assert who is not None  # check_admin_post refused an anonymous caller
    version = _int_field(form, "version", "a commit: Delta version or Iceberg snapshot id")
    db, _, name = form.get("table", "").partition(".")

    def act() -> str:
        with about("form.table"):
            info = ctx.app.publisher.table(db, name)
        with about("form.version"):
            done = skip(ctx.app.publisher, info, version, principal=who.name)
        return f"skipped {done.commits} of {info.qualified}"  # every commit it covers

    said = await run_in_threadpool(act)
    return RedirectResponse(f"/ui/ops?done={quote(said)}", status_code=303)


def _int_field(form: dict[str, str], field: str, what: str) -> int:
    raw = form.get(field, "")
    # 19 digits can still be past a signed 64-bit id (an OverflowError in the driver).
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 19 or int(raw) > MAX_INT64:
        raise ApiProblem(422, "invalid-input", "Invalid input",
                         f"form.{field}: expected {what}, got {raw[:20]!r}",
                         field=f"form.{field}")
    return int(raw)


def _letter_action(form: dict[str, str]) -> tuple[str, int]:
    action = form.get("action", "")
    if action not in ("redrive", "discard"):
        raise ApiProblem(422, "invalid-input", "Invalid input",
                         f"form.action: expected redrive or discard, got {action[:20]!r}",
                         field="form.action")
    return action, _int_field(form, "event_id", "an event id")


#: The JSON API's field of an expectation -> the form's.
_FORM_FIELDS = {"body.name": "form.name", "body.specTemplate": "form.spec_template",
                "body.cron": "form.cron", "body.timezone": "form.timezone",
                "body.deadline": "form.deadline", "body": "form"}


@router.post("/tables/{table}/expectations")
async def add_expectation(request: Request, table: str, ctx: Ctx) -> Response:
    form = await admin_form(request, ctx)

    def add() -> str:
        info = table_info(ctx, table)
        try:
            ctx.app.deadlines.add(
                info.db, info.name, name=form.get("name", "").strip(),
                spec_template=form.get("spec_template", "").strip(),
                cron=form.get("cron", "").strip(), timezone=form.get("timezone", "UTC").strip(),
                deadline=form.get("deadline", "").strip(),
            )
        except ConflictError as exc:  # an expectation of that name exists
            raise from_error(exc, "form.name") from exc
        except ValidationError as exc:  # the API's fields, named as the form's
            raise from_error(exc, _FORM_FIELDS[field_of(str(exc))]) from exc
        return info.qualified

    name = await run_in_threadpool(add)
    return RedirectResponse(f"/ui/tables/{quote(name)}", status_code=303)


@router.post("/tables/{table}/expectations/{name}/remove")
async def remove_expectation(request: Request, table: str, name: str, ctx: Ctx) -> Response:
    await admin_form(request, ctx)  # refuses unless admin, same origin, CSRF token

    def remove() -> str:
        info = table_info(ctx, table)
        with about("path.name"):
            ctx.app.deadlines.remove(info.db, info.name, name)
        return info.qualified

    qualified = await run_in_threadpool(remove)
    return RedirectResponse(f"/ui/tables/{quote(qualified)}", status_code=303)
