"""The status pages at ``/ui`` (issue 19): server-rendered, same process and auth as the API.

:data:`router` is mounted by :func:`partition_notify.http.app.create_http_app`.
"""

from __future__ import annotations

from fastapi import APIRouter

from partition_notify.http.ui import ops, pages

router = APIRouter()
router.include_router(pages.router)
router.include_router(ops.router)
