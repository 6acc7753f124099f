"""The FastAPI application factory: one ``App`` (composition root) behind HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI

from partition_notify.app import App
from partition_notify.http import (
    openapi,
    problems,
    routes_commits,
    routes_deadlines,
    routes_lakehouse,
    routes_live,
    routes_ops,
    routes_read,
    routes_rules,
    routes_withdraw,
    routes_write,
)
from partition_notify.http.context import HttpContext
from partition_notify.http.hub import EventHub
from partition_notify.http.json_body import RefuseRepeatedKeys, refuse_repeated_query
from partition_notify.http.limits import ConnectionCaps
from partition_notify.http.slow_clients import BodyDeadline
from partition_notify.http.store import HttpStore
from partition_notify.http.ui import router as ui_router
from partition_notify.metrics import Metrics

DESCRIPTION = """\
Partition-completion notifications over HTTP, for consumers and writers that
are not Python. Authenticate with `Authorization: Bearer <token>` (tokens:
`partition-notify token create`). Errors are `application/problem+json`.
The message bodies are the JSON Schemas in docs/schemas/.
"""

#: Every route of the API, in the order of the OpenAPI document; adding a
#: route module is one entry here.
ROUTERS: tuple[APIRouter, ...] = (
    routes_ops.router,
    routes_read.router,
    routes_live.router,
    routes_write.router,
    routes_withdraw.router,
    routes_deadlines.router,
    routes_rules.router,
    routes_commits.router,
    routes_lakehouse.router,
    ui_router,
)


def create_http_app(
    app: App,
    *,
    metrics: Metrics | None = None,
    healthy: Callable[[], bool] | None = None,
    extra_routers: Iterable[APIRouter] = (),
) -> FastAPI:
    """The HTTP API of ``app``; ``extra_routers`` are mounted as they are.

    Extra routers reuse :func:`partition_notify.http.auth.require_role` and
    :func:`partition_notify.http.idempotency.idempotent_write`.
    """
    hub = EventHub(app.store, app.settings.poll_interval_seconds,
                   wakeups=app.settings.cross_process_wakeups)
    ctx = HttpContext(
        app=app,
        http_store=HttpStore(app.store),
        hub=hub,
        metrics=metrics or Metrics(),
        healthy=healthy or (lambda: True),
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await hub.start()
        try:
            yield
        finally:
            await hub.stop()

    api = FastAPI(
        title="partition-notify",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
        dependencies=[Depends(refuse_repeated_query)],
    )
    api.state.pn = ctx
    problems.install(api)
    openapi.install(api)
    for router in (*ROUTERS, *extra_routers):
        api.include_router(router)
    # Innermost: reads a body only within the limit and the deadline below.
    api.add_middleware(RefuseRepeatedKeys)
    api.add_middleware(problems.BodyLimit, limit=app.settings.http_max_body_bytes)
    # Outside BodyLimit: a slow body gets its 408 however the inner layers unwind.
    api.add_middleware(BodyDeadline, seconds=app.settings.http_body_timeout_seconds)
    # Added last, so it runs first: a refused request costs no body read.
    api.add_middleware(ConnectionCaps, ctx=ctx)
    return api
