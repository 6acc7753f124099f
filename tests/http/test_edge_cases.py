"""HTTP edge cases of issue 24: each answered with a specific 4xx, never a 500.

Event ids beyond 64 bits, Unicode digits and 5,000 digits; a deadline offset
of 5,000 digits; a revoked token on an open SSE stream; re-registering a
table differently; the problem field of a bad table name in a body. A real
``serve`` on SQLite and PostgreSQL.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from partition_notify.http.routes_live import PING_SECONDS
from partition_notify.http.store import HttpStore
from tests.http.support import Server, start_server
from tests.http.test_reads import Sse
from tests.http.test_writes import assert_problem
from tests.support.markers import uses

#: The stream re-checks its token this often here (the default is longer).
RECHECK_SECONDS = 0.5
#: Read deadline on the stream: below the ping interval, so a stream that stays
#: open after the revocation fails the test instead of blocking it on pings.
STREAM_READ_SECONDS = PING_SECONDS / 2


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
@uses("postgres", when=lambda param: param == "postgresql")
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    yield from start_server(request, PN_HTTP_STREAM_AUTH_RECHECK_SECONDS=str(RECHECK_SECONDS))


@pytest.mark.parametrize("raw", [str(2**64), str(2**63), "²", "1²", "9" * 5000])
def test_last_event_id_out_of_range_or_not_ascii_is_422(server: Server, raw: str) -> None:
    table = server.table()
    with server.client("read") as c:
        assert_problem(c.get(f"/v1/tables/{table}/stream", headers={"Last-Event-ID": raw.encode()}),
                       422, "header.Last-Event-ID", "non-negative integer")
        if raw.isascii():
            r = c.get(f"/v1/tables/{table}/stream", params={"last_event_id": raw})
            assert_problem(r, 422, "query.last_event_id")


def test_deadline_offset_of_5000_digits_is_422(server: Server) -> None:
    table = server.table()
    body = {"name": "d", "specTemplate": "datestamp={{ ds_nodash }}", "cron": "0 0 * * *",
            "timezone": "UTC", "deadline": "+" + "9" * 5000 + "h"}
    with server.client("write") as c:
        r = c.post(f"/v1/tables/{table}/expectations", json=body)
    assert r.status_code == 422, r.text
    assert "deadline" in r.json()["detail"] and len(r.text) < 2000


def test_revoked_token_loses_its_open_stream(server: Server) -> None:
    table = server.table()
    db, name = table.split(".")
    tokens = HttpStore(server.app.store)
    token_name = f"s-{uuid.uuid4().hex[:8]}"
    token = tokens.create_token(token_name, "read")[1]
    headers = {"Authorization": f"Bearer {token}"}
    with (httpx.Client(base_url=server.base, headers=headers, timeout=STREAM_READ_SECONDS) as c,
          c.stream("GET", f"/v1/tables/{table}/stream") as r):
        events = iter(Sse(r))
        sent = server.app.publisher.send_mark_set_done(db, name, "datestamp=1")
        assert next(events)[0] == sent.event_id
        tokens.revoke_token(token_name)
        # The server ends the stream within its re-check interval: iteration stops.
        rest = list(events)
    assert rest == []


def test_register_again_differently_is_409_not_a_rewrite(server: Server) -> None:
    db = f"r{uuid.uuid4().hex[:8]}"
    body = {"table": f"{db}.t", "partitionKeys": ["ds"], "retentionSeconds": 3600,
            "location": "/data/t"}
    with server.client("admin") as c:
        assert c.post("/v1/tables", json=body).status_code == 201
        assert c.post("/v1/tables", json=body).status_code == 200
        assert_problem(c.post("/v1/tables", json={**body, "location": "/data/other"}), 409,
                       "body.location", "location '/data/t'")
        assert_problem(c.post("/v1/tables", json={**body, "retentionSeconds": 60}), 409,
                       "body.retentionSeconds", "retentionSeconds 3600")
        assert_problem(c.post("/v1/tables", json={**body, "partitionKeys": ["day"]}), 409,
                       "body.partitionKeys", "partition keys ['ds']")
        assert_problem(c.post("/v1/tables", json={**body, "topic": "other.topic"}), 409,
                       "body.topic", "other.topic")
        stored = c.get(f"/v1/tables/{db}.t").json()
    assert (stored["retentionSeconds"], stored.get("location")) == (3600, "/data/t")


def test_bad_table_name_in_the_body_names_the_body_field(server: Server) -> None:
    with server.client("admin") as c:
        assert_problem(c.post("/v1/tables", json={"table": "no-dot", "partitionKeys": ["ds"]}),
                       422, "body.table", "db.table")


@pytest.mark.parametrize(("change", "field", "fragment"), [
    ({"partitionKeys": ["bad-key"]}, "body.partitionKeys", "bad-key"),
    ({"partitionKeys": ["ds", "ds"]}, "body.partitionKeys", "listed twice"),
    ({"retentionSeconds": 10**12}, "body.retentionSeconds", "at most"),
    ({"topic": "bad topic!"}, "body.topic", "bad topic!"),
    ({"location": "/data/\u0000x"}, "body.location", "NUL character"),
])
def test_a_bad_registration_names_its_field(server: Server, change: dict[str, object],
                                            field: str, fragment: str) -> None:
    # Before: every one of these was named "body".
    db = f"r{uuid.uuid4().hex[:8]}"
    with server.client("admin") as c:
        r = c.post("/v1/tables", json={"table": f"{db}.t", "partitionKeys": ["ds"], **change})
        assert_problem(r, 422, field, fragment)
        assert c.get(f"/v1/tables/{db}.t").status_code == 404


def test_a_bad_change_of_a_table_names_its_field(server: Server) -> None:
    table = server.table(keys=("ds",))
    with server.client("admin") as c:
        assert_problem(c.patch(f"/v1/tables/{table}", json={"topic": "bad topic!"}), 422,
                       "body.topic", "bad topic!")
        assert_problem(c.patch(f"/v1/tables/{table}", json={"location": "\u0000"}), 422,
                       "body.location", "NUL character")
        assert_problem(c.patch(f"/v1/tables/{table}", json={"partitionKeys": ["a-b"]}), 422,
                       "body.partitionKeys", "a-b")
        assert c.post(f"/v1/tables/{table}/set-done", json={"spec": "ds=1"}).status_code == 201
        assert_problem(c.patch(f"/v1/tables/{table}", json={"partitionKeys": ["day"]}), 409,
                       "body.partitionKeys", "['ds'] to ['day']")
