"""``POST /v1/commits`` with a manifest that misses a field or has one of the wrong type
names that field as the problem's ``field`` (``body.version``, ``body.partitions.0``), as
every other route does and as the detail already says. Before: ``field`` was ``body``."""

from __future__ import annotations

import uuid

import pytest

from tests.http.support import Server
from tests.http.test_writes import assert_problem, events

MANIFEST = {"version": 1, "jobId": "", "table": "", "outputPath": "/abs/out",
            "partitions": [], "mode": "append"}


@pytest.mark.parametrize(("change", "field", "detail"), [
    ({"version": None}, "body.version", "manifest field 'version'"),
    ({"outputPath": None}, "body.outputPath", "manifest field 'outputPath'"),
    ({"partitions": "datestamp=1"}, "body.partitions", "manifest field 'partitions'"),
    ({"partitions": [7]}, "body.partitions.0", "manifest field 'partitions.0'"),
])
def test_a_bad_manifest_field_is_named(server: Server, change: dict[str, object],
                                       field: str, detail: str) -> None:
    table = server.table()
    body = {**MANIFEST, "jobId": uuid.uuid4().hex, "table": table, **change}
    body = {k: v for k, v in body.items() if v is not None}
    before = events(server)
    with server.client("write") as c:
        r = c.post("/v1/commits", json=body)
    assert_problem(r, 422, field, detail)
    assert events(server) == before


def test_a_manifest_that_is_no_object_is_the_body(server: Server) -> None:
    with server.client("write") as c:
        r = c.post("/v1/commits", json=[1])
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "body", r.json()
