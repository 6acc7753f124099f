"""Writes over real HTTP: announce, set-done, register; idempotency; bad input stores nothing."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from tests.http.support import Server

PROBLEM = "application/problem+json"


def events(server: Server) -> int:
    return server.app.store.log.max_event_id()


def idem_rows(server: Server) -> int:
    with server.app.store.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM pn_idempotency")).scalar() or 0)


def assert_problem(r: httpx.Response, status: int, field: str | None, *fragments: str) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith(PROBLEM), r.headers
    body = r.json()
    assert body["status"] == status and body["type"].startswith("urn:partition-notify:problem:")
    assert body["title"] and body["detail"]
    if field is not None:
        assert body.get("field") == field, body
    for f in fragments:
        assert f in body["detail"], body


def test_announce_and_set_done_publish_through_the_publisher(server: Server) -> None:
    table = server.table()
    db, name = table.split(".")
    with server.client("write") as c:
        r = c.post(f"/v1/tables/{table}/partitions", json={
            "partitions": ["datestamp=20110228/region=us",
                           {"datestamp": "20110228", "region": "eu"}],
            "locations": ["s3://b/us", None], "revision": 7})
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["skipped"] == 0
        assert [m["partitions"][0]["region"] for m in body["announced"]] == ["us", "eu"]
        assert body["announced"][0]["locations"] == ["s3://b/us"]
        assert body["announced"][0]["revision"] == 7
        again = c.post(f"/v1/tables/{table}/partitions",
                       json={"partitions": ["datestamp=20110228/region=us"]})
        assert again.status_code == 201 and again.json() == {
            "table": table, "announced": [], "skipped": 1}
        r = c.post(f"/v1/tables/{table}/set-done", json={"spec": "datestamp=20110228"})
        assert r.status_code == 201, r.text
        done = r.json()["setDone"]
        assert done["eventType"] == "PARTITION_DONE"
        assert done["partitionSpecString"] == "datestamp=20110228"
    # The Python subscriber sees exactly what HTTP wrote.
    with server.app.subscriber() as sub:
        assert sub.is_partition_present(db, name, "datestamp=20110228/region=eu")
        hist = sub.set_done_history(db, name)
        assert [m.event_id for m in hist] == [done["eventId"]]


def test_idempotent_retry_never_announces_twice(server: Server) -> None:
    table = server.table()
    key = uuid.uuid4().hex
    payload = {"spec": "datestamp=20110301"}
    with server.client("write") as c:
        first = c.post(f"/v1/tables/{table}/set-done", json=payload,
                       headers={"Idempotency-Key": key})
        assert first.status_code == 201
        before = events(server)
        retry = c.post(f"/v1/tables/{table}/set-done", json=payload,
                       headers={"Idempotency-Key": key})
        assert retry.status_code == 201
        assert retry.json() == first.json()
        assert retry.headers["idempotent-replayed"] == "true"
        assert events(server) == before
        # Same key, different body: 422 problem, nothing logged.
        other = c.post(f"/v1/tables/{table}/set-done", json={"spec": "datestamp=20110302"},
                       headers={"Idempotency-Key": key})
        assert_problem(other, 422, "header.Idempotency-Key", key, "different request")
        assert events(server) == before
        # Another token's key space is its own.
        with server.client("admin") as admin:
            r = admin.post(f"/v1/tables/{table}/set-done", json=payload,
                           headers={"Idempotency-Key": key})
            assert r.status_code == 201 and r.json()["setDone"]["eventId"] == before + 1


def test_concurrent_requests_with_one_key_write_once(server: Server) -> None:
    table = server.table()
    key = uuid.uuid4().hex
    before = events(server)
    results: list[httpx.Response] = []
    go = threading.Barrier(8)

    def post() -> None:
        with server.client("write") as c:
            go.wait(10)
            results.append(c.post(f"/v1/tables/{table}/set-done",
                                  json={"spec": "datestamp=20110303"},
                                  headers={"Idempotency-Key": key}))

    threads = [threading.Thread(target=post) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [r.status_code for r in results] == [201] * 8, [r.text for r in results]
    assert len({r.json()["setDone"]["messageId"] for r in results}) == 1
    assert events(server) == before + 1


def test_register_needs_admin_and_is_idempotent(server: Server) -> None:
    db = f"r{uuid.uuid4().hex[:8]}"
    body = {"table": f"{db}.t", "partitionKeys": ["ds"]}
    with server.client("write") as c:
        assert c.post("/v1/tables", json=body).status_code == 403
    with server.client("admin") as c:
        r = c.post("/v1/tables", json=body)
        assert r.status_code == 201 and r.json()["partitionKeys"] == ["ds"]
        assert c.post("/v1/tables", json=body).status_code == 200
        assert_problem(c.post("/v1/tables", json={**body, "partitionKeys": ["x"]}), 409,
                       "body.partitionKeys", "registered with partition keys ['ds']")


def test_concurrent_identical_registrations_answer_201_once(server: Server) -> None:
    # Before: two (or more) of the ten were told 201 Created. Several rounds: the race
    # needs two requests between the existence check and the catalog's write.
    for _ in range(5):
        body = {"table": f"r{uuid.uuid4().hex[:8]}.t", "partitionKeys": ["ds"]}
        results: list[httpx.Response] = []
        go = threading.Barrier(10)

        def post(body: dict[str, object] = body, results: list[httpx.Response] = results,
                 go: threading.Barrier = go) -> None:
            with server.client("admin") as c:
                go.wait(10)
                results.append(c.post("/v1/tables", json=body))

        threads = [threading.Thread(target=post) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        statuses = sorted(r.status_code for r in results)
        assert statuses == [200] * 9 + [201], [r.text for r in results]
        with server.client("admin") as c:
            again = c.post("/v1/tables", json=body)  # what a sequential repeat answers
        assert again.status_code == 200
        assert all(r.json() == again.json() for r in results)


@pytest.mark.parametrize(("field", "a", "b"), [
    ("partitionKeys", ["ds"], ["day"]),
    ("location", "/data/a", "/data/b"),
    ("retentionSeconds", 60, 120),
    ("topic", "race.a", "race.b"),
])
def test_concurrent_different_registrations_one_wins_the_others_409(
    server: Server, field: str, a: object, b: object
) -> None:
    # Before: both bodies were told 2xx; the later one's location or retention
    # silently replaced the winner's. A sequential second registration is a 409.
    for _ in range(5):
        table = f"r{uuid.uuid4().hex[:8]}.t"
        bodies = [{"table": table, "partitionKeys": ["ds"], field: v} for v in (a, b)]
        results: list[tuple[int, httpx.Response]] = []
        go = threading.Barrier(10)

        def post(i: int, results: list[tuple[int, httpx.Response]] = results,
                 go: threading.Barrier = go, bodies: list[dict[str, Any]] = bodies) -> None:
            with server.client("admin") as c:
                go.wait(10)
                results.append((i % 2, c.post("/v1/tables", json=bodies[i % 2])))

        threads = [threading.Thread(target=post, args=(i,)) for i in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(results) == 10
        [winner] = [i for i, r in results if r.status_code == 201]
        for i, r in results:
            if i == winner:
                assert r.status_code in (200, 201), r.text
            else:
                assert_problem(r, 409, f"body.{field}", "registering does not change")
        with server.client() as c:
            stored = c.get(f"/v1/tables/{table}").json()
        assert stored[field] == bodies[winner][field], (stored, winner)


BAD_WRITES: list[tuple[str, str, Any, dict[str, str], int, str | None, str]] = [
    # (what, path suffix, json body or raw bytes, headers, status, field, detail fragment)
    ("unknown key", "partitions", {"partitions": ["datestamp=1/regio=us"]}, {}, 422,
     "body.partitions", "unknown key(s) ['regio']"),
    ("partial spec announced", "partitions", {"partitions": ["datestamp=1"]}, {}, 422,
     "body.partitions", "missing ['region']"),
    ("empty value", "partitions", {"partitions": ["datestamp=/region=us"]}, {}, 422,
     "body.partitions", "value of partition key 'datestamp' is empty"),
    ("listed twice", "partitions", {"partitions": ["datestamp=1/region=u", "region=u/datestamp=1"]},
     {}, 422, "body.partitions", "listed twice"),
    ("bad escape", "partitions", {"partitions": ["datestamp=1%zz/region=us"]}, {}, 422,
     "body.partitions", "two hex digits"),
    # body.locations since session 18 (named body.partitions before).
    ("locations mismatch", "partitions", {"partitions": ["datestamp=1/region=u"],
     "locations": ["a", "b"]}, {}, 422, "body.locations", "2 locations for 1 partitions"),
    ("no locations for partitions", "partitions", {"partitions": ["datestamp=1/region=u"],
     "locations": []}, {}, 422, "body.locations", "0 locations for 1 partitions"),
    ("NUL in a location", "partitions", {"partitions": ["datestamp=1/region=u"],
     "locations": ["s3://b/\u0000x"]}, {}, 422, "body.locations", "NUL character"),
    ("no partitions", "partitions", {"partitions": []}, {}, 422, "body.partitions",
     "at least 1 item"),
    ("partitions not a list", "partitions", {"partitions": "datestamp=1"}, {}, 422,
     "body.partitions", "valid list"),
    ("unknown field", "partitions", {"partitions": ["datestamp=1/region=u"], "foo": 1}, {}, 422,
     "body.foo", "Extra inputs"),
    ("replace not bool", "partitions", {"partitions": ["datestamp=1/region=u"], "replace": "yes"},
     {}, 422, "body.replace", "valid boolean"),
    ("negative revision", "partitions", {"partitions": ["datestamp=1/region=u"], "revision": -1},
     {}, 422, "body.revision", "greater than or equal to 0"),
    ("revision beyond BIGINT", "partitions", {"partitions": ["datestamp=1/region=u"],
     "revision": 2**64}, {}, 422, "body.revision", "less than or equal to"),
    ("not UTF-8", "set-done", b'\xff\xfe{"spec": "datestamp=1"}',
     {"content-type": "application/json"}, 400, "body", "UTF-8 JSON"),
    ("nested too deep", "set-done", b"[" * 100_000 + b"]" * 100_000,
     {"content-type": "application/json"}, 413, "body", "larger than 65536"),
    ("deep but small", "set-done", b"[" * 20_000 + b"]" * 20_000,
     {"content-type": "application/json"}, 400, "body", "nested"),
    ("lone surrogate", "set-done", b'{"spec": "datestamp=\\ud800"}',
     {"content-type": "application/json"}, 422, "body.spec", "cannot be encoded as UTF-8"),
    ("value too long", "set-done", {"spec": "datestamp=" + "x" * 1500}, {}, 422, "body.spec",
     "1500 characters; at most 1024"),
    ("bool value", "set-done", {"spec": {"datestamp": True}}, {}, 422, "body.spec",
     "must be a string or integer, got bool"),
    ("spec a number", "set-done", {"spec": 5}, {}, 422, "body.spec",
     "object of key to value, got 5"),
    ("spec missing", "set-done", {}, {}, 422, "body.spec", "Field required"),
    ("set-done unknown key", "set-done", {"spec": "day=1"}, {}, 422, "body.spec",
     "unknown key(s) ['day']"),
    ("set-done not key=value", "set-done", {"spec": "datestamp"}, {}, 422, "body.spec",
     "is not key=value"),
    ("malformed JSON", "set-done", b'{"spec":', {"content-type": "application/json"}, 400,
     "body", "not valid JSON"),
    ("JSON array body", "set-done", [1], {}, 422, "body", "valid dictionary"),
    ("bad idempotency key", "set-done", {"spec": "datestamp=1"}, {"Idempotency-Key": "a b"}, 422,
     "header.Idempotency-Key", "printable ASCII"),
    ("body too large", "partitions", {"partitions": ["datestamp=1/region=" + "x" * 70000]}, {},
     413, "body", "larger than 65536 bytes"),
]


@pytest.mark.parametrize("case", BAD_WRITES, ids=[c[0] for c in BAD_WRITES])
def test_bad_write_is_a_specific_4xx_and_stores_nothing(
    server: Server, case: tuple[str, str, Any, dict[str, str], int, str | None, str]
) -> None:
    _, suffix, body, headers, status, field, fragment = case
    table = server.table()
    before, keys = events(server), idem_rows(server)
    with server.client("write") as c:
        url = f"/v1/tables/{table}/{suffix}"
        if isinstance(body, bytes):
            r = c.post(url, content=body, headers=headers)
        else:
            r = c.post(url, json=body, headers={"Idempotency-Key": uuid.uuid4().hex, **headers})
    assert_problem(r, status, field, fragment)
    assert r.json()["detail"].count("got ") <= 1, r.json()  # the input is shown once
    assert events(server) == before
    assert idem_rows(server) == keys


@pytest.mark.parametrize(("ref", "status", "fragment"), [
    ("nodot", 422, "must be written db.table"),
    ("bad-db.t", 422, "illegal character(s) '-'"),
    ("nosuch.table", 404, "is not registered"),
])
def test_bad_table_reference(server: Server, ref: str, status: int, fragment: str) -> None:
    before = events(server)
    with server.client("write") as c:
        r = c.post(f"/v1/tables/{ref}/set-done", json={"spec": "datestamp=1"})
    assert_problem(r, status, "path.table", fragment)
    assert events(server) == before


def test_unknown_route_and_method_are_problems(server: Server) -> None:
    with server.client("admin") as c:
        assert_problem(c.get("/v1/nope"), 404, None, "Not Found")
        assert_problem(c.delete("/v1/tables"), 405, None, "Method Not Allowed")
