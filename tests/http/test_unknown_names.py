"""Every HTTP GET route that takes a name answers an unknown or malformed one with a
specific 4xx problem: never 200 with an empty answer, never 500.

The routes come from the real application (``/openapi.json`` and the routes
it leaves out, the ``/ui`` pages), so a new route is checked as soon as it is
added; a route with a required parameter this test cannot fill fails until
SAMPLES gives it a value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
from fastapi.routing import APIRoute

from partition_notify.http.app import ROUTERS, create_http_app
from tests.http.support import Server

#: A valid value for each parameter that is not the name under test.
SAMPLES = {"partition": "datestamp=1/region=us", "spec": "datestamp=1", "timeout": "0",
           "event_id": "1"}
#: (kind, table, other name); the answer must name the value.
NAMES = [
    ("unknown", "nope.missing", "missing"),
    ("malformed", "bad db.orders", "bad name!"),
    ("malformed", "nodot", "x" * 300),
]


def _paths(routes: list[object], prefix: str = "") -> Iterator[str]:
    """Every GET path of ``routes``, included routers walked with their prefixes."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            context = getattr(route, "include_context", None)
            yield from _paths(included.routes, prefix + getattr(context, "prefix", ""))
        elif isinstance(route, APIRoute) and "GET" in route.methods:
            yield prefix + route.path


def _get_routes(server: Server) -> list[tuple[str, set[str], set[str]]]:
    """(path, path parameters, required query parameters) of every GET route with a
    path parameter: the API's (ROUTERS, as the app mounts them) and the /ui pages."""
    required: dict[str, set[str]] = {}
    for path, ops in create_http_app(server.app).openapi()["paths"].items():
        if "get" in ops:
            required[path] = {p["name"] for p in ops["get"].get("parameters", [])
                              if p["in"] == "query" and p.get("required")}
    out = []
    for path in (p for router in ROUTERS for p in _paths(router.routes)):
        params = set(re.findall(r"{(\w+)(?::\w+)?}", path))
        if params:
            plain = re.sub(r"{(\w+):\w+}", r"{\1}", path)
            out.append((path, params, required.get(plain, set())))
    return out


def _failures(c: httpx.Client, path: str, params: set[str], query: set[str],
              table: str) -> Iterator[str]:
    """What is wrong with each answer of ``path`` to each unknown or malformed name."""
    for kind, bad_table, bad_name in NAMES:
        for under_test in sorted(params & {"table", "name"}):
            values = {**SAMPLES, "table": table, "name": "daily"}
            values[under_test] = bad = bad_table if under_test == "table" else bad_name
            url = re.sub(r"{(\w+)(?::\w+)?}", lambda m, v=values: v[m.group(1)], path)
            r = c.get(url, params={q: values[q] for q in query})
            named = bad[:40] in r.text or bad.split(".")[0] in r.text
            if r.status_code not in (404, 422) or not named:
                yield f"{kind} {under_test}: GET {url} -> {r.status_code} {r.text[:160]!r}"


def test_every_named_route_says_what_is_unknown_or_malformed(server: Server) -> None:
    routes = _get_routes(server)
    assert len(routes) >= 15, routes  # the walk found the API's and the pages' routes
    assert any("/ui/" in p for p, _, _ in routes) and any(p.startswith("/v1/") for p, _, _ in
                                                          routes), routes
    table = server.table()
    failures: list[str] = []
    # The /ui pages authenticate by their sign-in cookie, the API by the bearer token.
    with server.client("admin", cookies={"pn_ui_token": server.tokens["admin"]},
                       timeout=10) as c:
        for path, params, query in routes:
            missing = (params | query) - {"table", "name"} - set(SAMPLES)
            assert not missing, f"{path}: add a sample value for {missing} to SAMPLES"
            failures += _failures(c, path, params, query, table)
    assert not failures, "\n".join(failures)
