"""A JSON object that repeats a key, anywhere in a request body, is a 422 naming the
key's path; nothing is stored. Before: the last value silently won (another parser
keeps the first), so what was stored was not what a reviewer of the body read."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.http.support import Server
from tests.http.test_writes import assert_problem, events, idem_rows

JSON = {"content-type": "application/json"}


def post(c: httpx.Client, url: str, raw: str, **headers: str) -> httpx.Response:
    return c.post(url, content=raw.encode(), headers={**JSON, **headers})


@pytest.mark.parametrize(("suffix", "raw", "field", "where"), [
    ("set-done", '{"spec": {"datestamp": "1", "datestamp": "2"}}', "body.spec.datestamp",
     "body.spec"),
    # The same key spelled with an escape is the same key.
    ("set-done", '{"spec": {"datestamp": "1", "date\\u0073tamp": "2"}}',
     "body.spec.datestamp", "body.spec"),
    ("set-done", '{"spec": "datestamp=1", "spec": "datestamp=2"}', "body.spec", "body"),
    ("partitions", '{"partitions": ["datestamp=1/region=us"], "partitions": ["datestamp=2/'
     'region=us"]}', "body.partitions", "body"),
    ("partitions", '{"partitions": [{"datestamp": "1", "region": "us"}, {"datestamp": "1", '
     '"region": "us", "region": "eu"}]}', "body.partitions.1.region", "body.partitions.1"),
    ("withdrawals", '{"spec": "datestamp=1", "reason": "a", "reason": "b"}', "body.reason",
     "body"),
])
def test_a_repeated_key_is_422_naming_it_and_stores_nothing(
        server: Server, suffix: str, raw: str, field: str, where: str) -> None:
    table = server.table()
    before, keys = events(server), idem_rows(server)
    with server.client("write") as c:
        r = post(c, f"/v1/tables/{table}/{suffix}", raw, **{"Idempotency-Key": uuid.uuid4().hex})
    assert_problem(r, 422, field, f"{where}: key '{field.rsplit('.', 1)[1]}' appears 2 times")
    assert events(server) == before
    assert idem_rows(server) == keys


def test_a_repeated_key_in_a_registration_registers_nothing(server: Server) -> None:
    db = f"r{uuid.uuid4().hex[:8]}"
    raw = f'{{"table": "{db}.a", "partitionKeys": ["ds"], "table": "{db}.b"}}'
    with server.client("admin") as c:
        assert_problem(post(c, "/v1/tables", raw), 422, "body.table", "key 'table'")
        assert c.get(f"/v1/tables/{db}.a").status_code == 404
        assert c.get(f"/v1/tables/{db}.b").status_code == 404
        # A merge-patch type is JSON too.
        table = server.table(keys=("ds",))
        r = c.patch(f"/v1/tables/{table}", content=b'{"topic": "a.b", "topic": "c.d"}',
                    headers={"content-type": "application/merge-patch+json"})
        assert_problem(r, 422, "body.topic", "key 'topic'")
        assert c.get(f"/v1/tables/{table}").json()["topic"] != "c.d"


def test_repeated_keys_in_rules_expectations_and_commits(server: Server) -> None:
    table = server.table()
    with server.client("admin") as c:
        r = post(c, f"/v1/tables/{table}/rules", '{"name": "r", "kind": "all-of", "params": '
                 '{"key": "region", "values": ["us"], "values": ["eu"], "by": ["datestamp"]}}')
        assert_problem(r, 422, "body.params.values", "body.params: key 'values'")
        r = post(c, f"/v1/tables/{table}/expectations", '{"name": "d", "name": "e", '
                 '"specTemplate": "datestamp={{ ds_nodash }}", "cron": "0 0 * * *", '
                 '"deadline": "06:00"}')
        assert_problem(r, 422, "body.name", "key 'name'")
        r = post(c, "/v1/commits", '{"version": 1, "jobId": "a", "jobId": "b"}')
        assert_problem(r, 422, "body.jobId", "key 'jobId'")
        assert c.get(f"/v1/tables/{table}/rules").json()["rules"] == []
        assert c.get(f"/v1/tables/{table}/expectations").json()["expectations"] == []


def test_the_same_key_in_different_objects_and_other_refusals_are_unchanged(
        server: Server) -> None:
    table = server.table()
    with server.client("write") as c:
        ok = post(c, f"/v1/tables/{table}/partitions", '{"partitions": [{"datestamp": "1", '
                  '"region": "us"}, {"datestamp": "1", "region": "eu"}]}')
        assert ok.status_code == 201, ok.text
        dup = '{"spec": {"datestamp": "1", "datestamp": "2"}}'
        # Not declared JSON: still 415; too large: still 413; not JSON: still 400.
        r = c.post(f"/v1/tables/{table}/set-done", content=dup.encode(),
                   headers={"content-type": "text/plain"})
        assert_problem(r, 415, "header.Content-Type")
        big = '{"spec": "datestamp=1", "spec": "' + "x" * 70_000 + '"}'
        assert_problem(post(c, f"/v1/tables/{table}/set-done", big), 413, "body")
        assert_problem(post(c, f"/v1/tables/{table}/set-done", '{"spec": {"a": 1, "a"'), 400,
                       "body", "not valid JSON")
        deep = "[" * 20_000 + "]" * 20_000
        assert_problem(post(c, f"/v1/tables/{table}/set-done", deep), 400, "body", "nested")


def test_a_repeated_query_parameter_is_422_naming_it(server: Server) -> None:
    """``?spec=datestamp=1&spec=datestamp=2`` answered for the last spec only, silently
    (a proxy or another framework takes the first): as with a repeated JSON key, none
    is taken. Parameters a route does not read stay ignored, repeated or not."""
    table = server.table()
    db, name = table.split(".")
    server.app.publisher.send_mark_set_done(db, name, "datestamp=2")
    base = f"/v1/tables/{table}"
    with server.client("read") as c:
        for url, param in [
            (f"{base}/set-done/covering?spec=datestamp=1&spec=datestamp=2", "spec"),
            (f"{base}/wait?spec=datestamp=1&spec=datestamp=2&timeout=0", "spec"),
            (f"{base}/wait?spec=datestamp=2&timeout=0&timeout=5", "timeout"),
            (f"{base}/set-done?since_event_id=0&since_event_id=1", "since_event_id"),
            (f"{base}/stream?last_event_id=0&last_event_id=1", "last_event_id"),
        ]:
            assert_problem(c.get(url), 422, f"query.{param}",
                           f"query.{param}: given 2 times; expected once")
        ok = c.get(f"{base}/set-done/covering?spec=datestamp=2&x=1&x=2")
        assert ok.status_code == 200 and ok.json()["done"] is True, ok.text
        assert c.get("/v1/tables?x=1&x=2").status_code == 200
