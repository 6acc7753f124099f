"""The OpenAPI document tells the truth about errors: every problem a route answers.

FastAPI documents only a route's success and its own 422 (``HTTPValidationError``,
``application/json``), but every error here is ``application/problem+json``
(:mod:`partition_notify.http.problems`) and most routes answer more than 422. A
client generated from ``/openapi.json`` would fail on the rest. This adds, to
each operation, the problem statuses that the layers in front of it can answer:

* every operation: 503 (store unavailable, connection cap, shutting down);
* a bearer-token operation: 401, 403;
* a request body: 400 (not JSON), 408 (body too slow), 413 (too large),
  415 (not declared JSON), 422 (a repeated key, a bad field);
* a path naming a table: 404 (not registered), 422 (not ``db.table``);
* a write: 409 (conflicts with what is stored), and, where the write is
  idempotent (``Idempotency-Key``), 202 (saved, the broker did not confirm yet);
* the event stream: 410 (events after ``Last-Event-ID`` were purged).

``tests/http/test_openapi_truth.py`` runs schemathesis against a real ``serve``
and fails on an undocumented status or content type.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from partition_notify.contract.names import MAX_NAME_LENGTH
from partition_notify.http.problems import PROBLEM_JSON, TYPE_BASE

PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}

PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "description": "RFC 9457 problem details; `field` names the input that was wrong.",
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "description": f"`{TYPE_BASE}<slug>`"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "field": {"type": "string", "description": "e.g. `body.spec`, `path.table`"},
        "instance": {"type": "string"},
    },
}

_ALWAYS = {"503": "store unavailable, too many connections, or the server is stopping"}
_TOKEN = {"401": "no token, or an unknown or revoked one",
          "403": "the token's role is too low for this operation"}
_BODY = {"400": "the body is not JSON",
         "408": "the body did not arrive within PN_HTTP_BODY_TIMEOUT_SECONDS",
         "413": "the body is over PN_HTTP_MAX_BODY_BYTES",
         "415": "the body is not declared application/json",
         "422": "a field of the body (or a parameter) is invalid; `field` names it"}
_INPUT = {"422": "a parameter is invalid; `field` names it"}
_TABLE = {"404": "the table (or the object the path names) is not registered"}
_WRITE = {"409": "conflicts with what is stored (e.g. registered otherwise)"}
_STREAM = {"410": "events after the given event id were purged: read history, then stream"}
_SAVED = ("saved and logged, the broker did not confirm it yet: the relay delivers it; "
          "`delivery` says why")


#: What ``table`` in a path accepts (http/common.table_ref, contract/names.py).
_NAME = f"[A-Za-z0-9_]{{1,{MAX_NAME_LENGTH}}}"
TABLE_PATTERN = rf"^{_NAME}\.{_NAME}$"


def _problem(description: str) -> dict[str, Any]:
    return {"description": description, "content": {PROBLEM_JSON: {"schema": PROBLEM_REF}}}


def _statuses(path: str, method: str, op: dict[str, Any]) -> dict[str, str]:
    """The problem statuses of one operation, with what each means there."""
    found = dict(_ALWAYS)
    if op.get("security"):
        found.update(_TOKEN)
    if op.get("parameters"):
        found.update(_INPUT)
    if "requestBody" in op:
        found.update(_BODY)
    if "{table}" in path:
        found.update(_TABLE)
        found.setdefault("422", _INPUT["422"])
    if method in ("post", "patch", "delete"):
        found.update(_WRITE)
    if path.endswith("/stream"):
        found.update(_STREAM)
    return found


def _idempotent(op: dict[str, Any]) -> bool:
    return any(p.get("name") == "Idempotency-Key" for p in op.get("parameters", ()))


def document_problems(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with every operation's problem responses and the ``Problem`` schema."""
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas["Problem"] = PROBLEM_SCHEMA
    for path, item in doc.get("paths", {}).items():
        for method, op in item.items():
            for param in op.get("parameters", ()):
                if param.get("in") == "path" and param.get("name") == "table":
                    param.setdefault("schema", {})["pattern"] = TABLE_PATTERN
                    param["description"] = "db.table: letters, digits and '_' on each side"
            responses = op.setdefault("responses", {})
            for status, description in _statuses(path, method, op).items():
                responses[status] = _problem(description)
            if _idempotent(op):
                success = next((r for s, r in responses.items() if s in ("200", "201")), None)
                if success is not None:
                    responses["202"] = {**success, "description": _SAVED}
    # FastAPI's own 422 schemas are no longer referenced: every 422 is a problem.
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    return doc


def install(api: FastAPI) -> None:
    """Make ``api.openapi()`` return FastAPI's document with its problems added once."""
    base = api.openapi
    documented: list[bool] = []

    def openapi() -> dict[str, Any]:
        doc = base()  # FastAPI builds it once and keeps it
        if not documented:
            document_problems(doc)
            documented.append(True)
        return doc

    setattr(api, "openapi", openapi)  # noqa: B010  (FastAPI's documented override)
