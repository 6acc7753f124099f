"""Request bodies whose JSON objects repeat a key: 422, before any route reads them.

FastAPI parses a body with ``json.loads``, which keeps the last value of a
repeated key: ``{"spec": {"datestamp": "1", "datestamp": "2"}}`` was stored
as ``datestamp=2``, silently, while a proxy or a reviewer reading the first
saw another request. This middleware parses each body declared JSON once more
(core/json_keys.py) and answers a problem naming the repeated key's path,
``body.spec.datestamp``; nothing is stored. A body that is not JSON at all is
left to FastAPI (its 400), one not declared JSON to the 415 (problems.py).
A query parameter given twice is refused the same way (``refuse_repeated_query``).
"""

from __future__ import annotations

from fastapi import Request
from fastapi.dependencies.models import Dependant
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from partition_notify.core import json_keys
from partition_notify.http.problems import ApiProblem, json_type, problem_response


class RefuseRepeatedKeys:
    """ASGI middleware, inside BodyLimit and BodyDeadline: they bound what it reads."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not json_type(_content_type(scope)):
            await self.app(scope, receive, send)
            return
        messages = await _read_body(receive)
        repeated = _repeated(b"".join(m.get("body", b"") for m in messages))
        if repeated is not None:
            where = repeated.where("body")
            response = problem_response(
                422, "invalid-input", "Invalid input", f"{where}: {repeated.what}",
                field=repeated.field("body"), instance=scope.get("path"))
            await response(scope, receive, send)
            return

        async def replay() -> Message:
            # What was read first, then the client's next messages (http.disconnect).
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


def _content_type(scope: Scope) -> str:
    for name, value in scope.get("headers") or ():
        if name == b"content-type":
            return bytes(value).decode("latin-1")
    return ""


async def _read_body(receive: Receive) -> list[Message]:
    """The request's messages up to its last body part (or a disconnect)."""
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request" or not message.get("more_body"):
            return messages


def _repeated(body: bytes) -> json_keys.RepeatedKey | None:
    if not body:
        return None
    try:
        return json_keys.loads(body)[1]
    except (ValueError, RecursionError):  # not JSON (or too deep): FastAPI's 400 says so
        return None


def refuse_repeated_query(request: Request) -> None:
    """A dependency of every route: a query parameter the route reads, given twice, is a
    422 naming it, as a repeated JSON key is. Starlette keeps the last value
    (``?spec=datestamp=1&spec=datestamp=2`` answered for ``datestamp=2``), other
    frameworks and proxies the first. Parameters the route does not read stay ignored."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None or not request.query_params:
        return
    for name in _query_names(dependant):
        count = len(request.query_params.getlist(name))
        if count > 1:
            raise ApiProblem(422, "invalid-input", "Invalid input",
                             f"query.{name}: given {count} times; expected once "
                             "(frameworks differ in which value they keep, so none is)",
                             field=f"query.{name}")


def _query_names(dependant: Dependant) -> set[str]:
    """The query parameters a route reads, its dependencies' included."""
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names
