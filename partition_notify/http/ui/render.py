"""Jinja2 templates of ``/ui`` (autoescaped), the vendored static files, shared helpers."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from partition_notify.http.auth import Principal
from partition_notify.http.ui.session import csrf_token, is_admin

P = ParamSpec("P")
HERE = Path(__file__).parent
#: The only files /ui/static serves, with their media types.
STATIC = {"ui.js": "text/javascript", "ui.css": "text/css"}


@functools.cache
def _env() -> Any:
    import jinja2  # the http extra; imported on first page, not at import time

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    )
    env.filters["when"] = when
    env.filters["when_iso"] = when_iso
    return env


def when_iso(text: str | None) -> str:
    """An ISO 8601 time with its offset (the deadlines API's), shown as :func:`when` does."""
    return "—" if not text else when(datetime.fromisoformat(text).timestamp())


@functools.lru_cache(maxsize=4096)
def when(epoch: float | None) -> str:
    # Cached: the cells of one commit share its time (strftime per cell was a tenth
    # of the board's render, bench/ui_render.py); 4,096 entries bound the memory.
    if epoch is None:
        return "—"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def page(request: Request, who: Principal, name: str, status: int = 200,
         **values: object) -> HTMLResponse:
    html = _env().get_template(name).render(
        who=who, admin=is_admin(who), csrf=csrf_token(request), **values
    )
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def timed(route: Callable[P, Response]) -> Callable[P, Response]:
    """A sync page route that answers with ``Server-Timing: app;dur=<wall ms>,
    cpu;dur=<this thread's CPU ms>``: reads plus render, without the network and
    without the CPU other threads took meanwhile (bench/ui_render.py reports both)."""
    @functools.wraps(route)
    def run(*args: P.args, **kwargs: P.kwargs) -> Response:
        wall, cpu = time.perf_counter(), time.thread_time()
        out = route(*args, **kwargs)
        out.headers["Server-Timing"] = (f"app;dur={(time.perf_counter() - wall) * 1000:.1f}, "
                                        f"cpu;dur={(time.thread_time() - cpu) * 1000:.1f}")
        return out

    return run


def to_sign_in(request: Request) -> RedirectResponse:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    from urllib.parse import quote

    return RedirectResponse(f"/ui/sign-in?next={quote(target, safe='')}", status_code=303)


def static_file(name: str) -> Response:
    kind = STATIC[name]
    body = (HERE / "static" / name).read_bytes()
    return Response(body, media_type=kind, headers={"Cache-Control": "max-age=300"})


#: Only our own scripts and styles; no framing (clickjacking of admin forms).
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
                               "form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
