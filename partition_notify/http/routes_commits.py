"""``POST /v1/commits``: what a Spark job committed (the JVM commit protocol posts it).

The body is a commit manifest (writers/commit_manifest.py). The table is
resolved by catalog name, else by output-path prefix; a job whose table is
not registered is answered 200 ``ignored`` (logged once), not an error.
Idempotent twice over: by ``Idempotency-Key`` (the JVM sends the job id)
like every write route, and by job id across the HTTP route and serve's
manifest pick-up.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse

from partition_notify.contract import AddPartitionMessage, AnyMessage, SetDoneMessage
from partition_notify.core.errors import (
    ConflictError,
    InvalidManifestError,
    JobIdReusedError,
    PartitionNotifyError,
    ValidationError,
)
from partition_notify.http.auth import Principal, require_role
from partition_notify.http.context import HttpContext, context
from partition_notify.http.idempotency import IdempotencyKey, fingerprint, idempotent_write
from partition_notify.http.problems import ApiProblem, about, from_error
from partition_notify.store import TableInfo
from partition_notify.store.provider import InTxn
from partition_notify.writers.commit_manifest import (
    CommitManifest,
    Outcome,
    already_processed,
    announce,
    manifest_from_obj,
    plan,
)
from partition_notify.writers.commit_refusals import CommitRefusals
from partition_notify.writers.commit_spool import apply_older

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1", tags=["spark"])
Writer = Annotated[Principal, Depends(require_role("write"))]
Ctx = Annotated[HttpContext, Depends(context)]


def _outcome(ctx: HttpContext, o: Outcome) -> JSONResponse:
    ctx.metrics.spark_commits.labels(status=o.status).inc()
    return JSONResponse({"status": o.status, "jobId": o.job_id, "table": o.table})


@router.post(
    "/commits",
    status_code=201,
    summary="Announce what a Spark job committed",
    description="add-partition per partition the job created (or overwrote), then the "
    "job's set-done; 200 `duplicate` for a job already announced (also when the spool "
    "pick-up wins the race), 200 `ignored` for a job whose table is not registered.",
)
def post_commit(
    request: Request, who: Writer, ctx: Ctx,
    body: Annotated[dict[str, object], Body()], key: IdempotencyKey = None,
) -> JSONResponse:
    try:
        return _post_commit(request, who, ctx, body, key)
    except ApiProblem as problem:
        if problem.status == 422:
            ctx.metrics.spark_commits.labels(status="rejected").inc()
            _keep(ctx, who, "rejected", body, problem.detail)
        raise
    except ValidationError as exc:  # plan()'s checks: answered by the handler as a 422
        ctx.metrics.spark_commits.labels(status="rejected").inc()
        _keep(ctx, who, "rejected", body, " ".join(str(exc).split()))
        raise


def _keep(ctx: HttpContext, who: Principal, status: str, body: dict[str, object],
          reason: str) -> None:
    """The reason, for /ui/ops; a store too broken to keep it does not change the
    answer the job gets."""
    job, table = body.get("jobId"), body.get("table") or body.get("outputPath")
    try:
        CommitRefusals(ctx.app.store).record(
            status, job if isinstance(job, str) else None,
            table if isinstance(table, str) else None, reason, who.name)
    except PartitionNotifyError as exc:
        log.warning("could not keep the reason of a %s Spark commit: %s", status, exc)


#: The most a POST waits for the older manifests of its table's spool.
OLDER_FIRST_SECONDS = 10.0


def _older_first(ctx: HttpContext, info: TableInfo, manifest: CommitManifest) -> None:
    """Commit order: the manifests spooled for the table while serve was down, committed
    before this one, are applied first (writers/commit_spool.py ``apply_older``)."""
    from partition_notify.http.store import HttpStore

    try:
        stats = apply_older(
            ctx.app.publisher, info, manifest.committed_at_ms,
            keys=HttpStore(ctx.app.store).signing_keys, default_fs=ctx.settings.default_fs,
            deadline_seconds=min(OLDER_FIRST_SECONDS,
                                 ctx.settings.spark_spool_scan_deadline_seconds))
    except PartitionNotifyError as exc:
        # The posted job is still applied; a late older one cannot undo it (commit_order.py).
        log.warning("spark job %s: the spool of %s could not be read first: %s",
                    manifest.job_id, info.qualified, exc)
        return
    ctx.metrics.spark_commits.labels(status="spooled").inc(stats.announced)
    if stats.jobs or stats.cut_short:
        log.info("spark job %s: older spooled commits of %s applied first: %s",
                 manifest.job_id, info.qualified, stats)


@contextmanager
def _naming_job_id() -> Iterator[None]:
    """A reused job id names ``body.jobId`` (the manifest's other errors keep theirs)."""
    try:
        yield
    except JobIdReusedError as exc:
        raise from_error(exc, "body.jobId") from exc


def _post_commit(
    request: Request, who: Principal, ctx: HttpContext, body: dict[str, object],
    key: str | None,
) -> JSONResponse:
    try:
        manifest = manifest_from_obj(body)
    except InvalidManifestError as exc:  # the field at fault, as every route names it
        raise from_error(exc, f"body.{exc.field}" if exc.field else "body") from exc
    publisher, default_fs = ctx.app.publisher, ctx.settings.default_fs
    with _naming_job_id():
        target = plan(publisher, manifest, default_fs)
    if isinstance(target, Outcome):
        if target.reason == "unmatched":  # not "staging": NotifyingWriter announces those
            where = manifest.table or manifest.output_path
            _keep(ctx, who, "ignored", body, f"no registered table matches {where}; "
                  "register it and post the manifest again")
        return _outcome(ctx, target)
    _older_first(ctx, target.info, manifest)
    fp = fingerprint(who, "POST", request.url.path, body)

    conflicted: list[bool] = []

    def write(in_txn: InTxn) -> object:
        with about("body"):
            try:
                return announce(publisher, manifest, target, in_txn, default_fs)
            except ConflictError:
                conflicted.append(True)   # answered below, not with the driver's words
                raise

    def render(messages: Sequence[AnyMessage]) -> dict[str, object]:
        return {
            "status": "announced",
            "jobId": manifest.job_id,
            "table": target.info.qualified,
            "announced": sum(isinstance(m, AddPartitionMessage) for m in messages),
            "setDone": any(isinstance(m, SetDoneMessage) for m in messages),
        }

    try:
        response = idempotent_write(ctx, who, key or manifest.job_id, fp, write, render)
    except ApiProblem:
        if not conflicted:
            raise
        # Another processor (serve's spool pick-up) recorded this job first?
        with _naming_job_id():  # the other processor's job may have had other content
            recorded = already_processed(publisher, manifest)
        if recorded:
            return _outcome(ctx, Outcome("duplicate", manifest.job_id, target.info.qualified))
        raise ApiProblem(
            409, "conflict", "Conflict",
            f"job {manifest.job_id}: a concurrent write to {target.info.qualified} "
            "conflicted; retry", field="body",
        ) from None
    if response.status_code in (201, 202):
        ctx.metrics.spark_commits.labels(status="announced").inc()
    return response
