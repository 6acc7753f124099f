"""Liveness, readiness and Prometheus metrics (no token needed)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from partition_notify.http.context import HttpContext, context
from partition_notify.http.problems import ApiProblem

router = APIRouter(tags=["operations"])
Ctx = Annotated[HttpContext, Depends(context)]


@router.get("/healthz", summary="Liveness: the process serves HTTP")
async def healthz() -> dict[str, object]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="Readiness: the store answered the last health check and the hub follows the log",
    responses={503: {"description": "not ready"}},
)
async def readyz(ctx: Ctx) -> dict[str, object]:
    if not ctx.healthy():
        raise ApiProblem(503, "not-ready", "Not ready", "the store failed the last health check")
    if not ctx.hub.ready.is_set():
        raise ApiProblem(503, "not-ready", "Not ready", "the event hub has not started")
    return {"status": "ready", "eventId": ctx.hub.cursor}


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(ctx: Ctx) -> Response:
    return Response(generate_latest(ctx.metrics.registry), media_type=CONTENT_TYPE_LATEST)
