"""A JSON route's body sent with another Content-Type is a 415 naming the header
(session 18). Before: curl's default form type or text/plain got a 422 saying the
body was not "a valid dictionary", which sent users looking at their JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.http.support import Server, start_server
from tests.http.test_writes import assert_problem


@pytest.fixture(scope="module", params=["sqlite"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    yield from start_server(request)


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain",
                                          "application/xml"])
def test_a_body_that_is_not_declared_json_is_415(server: Server, content_type: str) -> None:
    table = server.table()
    body = json.dumps({"partitions": ["datestamp=1/region=us"]})
    with server.client("write") as c:
        r = c.post(f"/v1/tables/{table}/partitions", content=body,
                   headers={"content-type": content_type})
        assert_problem(r, 415, "header.Content-Type", content_type, "application/json")
        db, name = table.split(".")
        with server.app.subscriber() as sub:
            assert not sub.is_partition_present(db, name, "datestamp=1/region=us")
        ok = c.post(f"/v1/tables/{table}/partitions", content=body,
                    headers={"content-type": "application/json; charset=utf-8"})
        assert ok.status_code == 201, ok.text
