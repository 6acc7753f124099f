"""Liveness, readiness and Prometheus metrics (no token needed)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from partition_notify.http.context import HttpContext, context
from partition_notify.http.problems import ApiProblem

router = APIRouter(tags=["operations"])
#: Consecutive failed relay batches (each after its backoff) before the relay counts
#: as failing: one failure is a broker restart, three are an outage.
RELAY_FAILING_AFTER = 3
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
    return {"status": "ready", "eventId": ctx.hub.cursor, "relay": _relay(ctx)}


@router.get(
    "/readyz/relay",
    summary="The relay delivers: fewer than RELAY_FAILING_AFTER consecutive batches failed",
    responses={503: {"description": "the relay cannot deliver to the broker"}},
)
async def relay_ready(ctx: Ctx) -> dict[str, object]:
    state = _relay(ctx)
    if state["status"] != "ok":
        raise ApiProblem(
            503, "relay-failing", "Relay failing",
            f"the relay's last {state['consecutiveFailures']} batch(es) failed: "
            f"{state['lastError']}; writes are saved and delivered once the broker answers")
    return state


def _relay(ctx: HttpContext) -> dict[str, object]:
    stats = ctx.app.relay.stats
    failing = stats.consecutive_failures >= RELAY_FAILING_AFTER
    return {"status": "failing" if failing else "ok",
            "consecutiveFailures": stats.consecutive_failures, "lastError": stats.last_error,
            "published": stats.published, "deadLettered": stats.dead_lettered}


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(ctx: Ctx) -> Response:
    return Response(generate_latest(ctx.metrics.registry), media_type=CONTENT_TYPE_LATEST)
