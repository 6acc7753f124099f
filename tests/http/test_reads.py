"""Reads over real HTTP: tables, partitions, history, coverage, long-poll waits, SSE streams."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.http.support import Server
from tests.http.test_writes import assert_problem
from tests.support.net import wait_until


def test_tables_and_one_table(server: Server) -> None:
    table = server.table()
    with server.client("read") as c:
        names = [t["name"] for t in c.get("/v1/tables").json()["tables"]]
        assert table in names
        one = c.get(f"/v1/tables/{table}").json()
        assert one["partitionKeys"] == ["datestamp", "region"]
        assert one["topic"] == f"hcat.{table}"
        assert_problem(c.get("/v1/tables/nosuch.table"), 404, "path.table", "not registered")


def test_partition_present_and_escaped_values(server: Server) -> None:
    table = server.table()
    db, name = table.split(".")
    server.app.publisher.announce_partitions(db, name, [{"datestamp": "1", "region": "a/b"}])
    with server.client("read") as c:
        r = c.get(f"/v1/tables/{table}/partitions/region=a%252Fb/datestamp=1")
        assert r.status_code == 200 and r.json()["present"] is True, r.text
        assert r.json()["values"] == {"datestamp": "1", "region": "a/b"}
        assert c.get(f"/v1/tables/{table}/partitions/datestamp=1/region=zz").json()[
            "present"] is False
        assert_problem(c.get(f"/v1/tables/{table}/partitions/datestamp=1"), 422,
                       "path.partition", "missing ['region']")
        assert_problem(c.get(f"/v1/tables/{table}/partitions/datestamp=1/region=%25zz"), 422,
                       "path.partition", "two hex digits")


def test_history_since_time_and_event_id(server: Server) -> None:
    table = server.table()
    db, name = table.split(".")
    first = server.app.publisher.send_mark_set_done(db, name, "datestamp=1")
    second = server.app.publisher.send_mark_set_done(db, name, "datestamp=2")
    with server.client("read") as c:
        all_ = c.get(f"/v1/tables/{table}/set-done").json()["setDone"]
        assert [m["eventId"] for m in all_] == [first.event_id, second.event_id]
        after = c.get(f"/v1/tables/{table}/set-done",
                      params={"since_event_id": first.event_id}).json()["setDone"]
        assert [m["eventId"] for m in after] == [second.event_id]
        future = c.get(f"/v1/tables/{table}/set-done", params={"since": time.time() + 3600})
        assert future.json()["setDone"] == []
        assert_problem(c.get(f"/v1/tables/{table}/set-done", params={"since": "yesterday"}),
                       422, "query.since", "valid number")
        assert_problem(c.get(f"/v1/tables/{table}/set-done", params={"since_event_id": -1}),
                       422, "query.since_event_id", "greater than or equal to 0")


def test_covering_coarser_covers_finer(server: Server) -> None:
    table = server.table()
    db, name = table.split(".")
    with server.client("read") as c:
        url = f"/v1/tables/{table}/set-done/covering"
        assert c.get(url, params={"spec": "datestamp=7/region=us"}).json()["done"] is False
        done = server.app.publisher.send_mark_set_done(db, name, "datestamp=7")
        r = c.get(url, params={"spec": "region=us/datestamp=7"}).json()
        assert r["done"] is True and r["setDone"]["eventId"] == done.event_id
        assert r["spec"] == "datestamp=7/region=us"
        assert c.get(url, params={"spec": "datestamp=8"}).json()["done"] is False
        assert_problem(c.get(url), 422, "query.spec", "Field required")
        assert_problem(c.get(url, params={"spec": "hour=1"}), 422, "query.spec",
                       "unknown key(s) ['hour']")


def test_covering_and_wait_answer_the_newest_completion(server: Server) -> None:
    """Done at revision 1, re-run at 2 (narrower spec): a late reader gets 2, not 1."""
    table = server.table()
    db, name = table.split(".")
    pub = server.app.publisher
    first = pub.send_mark_set_done(db, name, "datestamp=5", revision=1)
    again = pub.send_mark_set_done(db, name, "datestamp=5/region=us", revision=2)
    with server.client("read") as c:
        r = c.get(f"/v1/tables/{table}/set-done/covering",
                  params={"spec": "datestamp=5/region=us"}).json()
        assert (r["setDone"]["eventId"], r["setDone"]["revision"]) == (again.event_id, 2)
        w = c.get(f"/v1/tables/{table}/wait", params={"spec": "datestamp=5/region=us"})
        assert (w.json()["eventId"], w.json()["revision"]) == (again.event_id, 2)
        eu = c.get(f"/v1/tables/{table}/wait", params={"spec": "datestamp=5/region=eu"})
        assert eu.json()["eventId"] == first.event_id  # only the broader one covers eu


def waits_in_progress(server: Server) -> float:
    text = httpx.get(server.base + "/metrics", timeout=10).text
    m = re.search(r"^pn_http_waits (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def test_long_poll_is_satisfied_by_a_coarser_set_done(server: Server) -> None:
    table = server.table()
    out: dict[str, Any] = {}

    def wait() -> None:
        with server.client("read") as c:
            started = time.monotonic()
            out["r"] = c.get(f"/v1/tables/{table}/wait",
                             params={"spec": "datestamp=9/region=us", "timeout": 30})
            out["s"] = time.monotonic() - started

    t = threading.Thread(target=wait)
    t.start()
    wait_until(lambda: waits_in_progress(server) >= 1, 20, "the long-poll to be registered")
    with server.client("write") as c:
        done = c.post(f"/v1/tables/{table}/set-done", json={"spec": "datestamp=9"}).json()
    t.join(40)
    r = out["r"]
    assert r.status_code == 200, r.text
    assert r.json()["eventId"] == done["setDone"]["eventId"]
    assert r.json()["partitionSpecString"] == "datestamp=9"
    assert out["s"] < 10
    # Already done: at once.
    with server.client("read") as c:
        again = c.get(f"/v1/tables/{table}/wait", params={"spec": "datestamp=9/region=eu"})
        assert again.status_code == 200


def test_long_poll_timeout_is_204_and_bad_input_422(server: Server) -> None:
    table = server.table()
    with server.client("read") as c:
        started = time.monotonic()
        r = c.get(f"/v1/tables/{table}/wait", params={"spec": "datestamp=1", "timeout": 0.5})
        assert r.status_code == 204 and r.content == b""
        assert 0.4 < time.monotonic() - started < 10
        assert_problem(c.get(f"/v1/tables/{table}/wait",
                             params={"spec": "datestamp=1", "timeout": 10_000}),
                       422, "query.timeout", "more than the server's maximum 300 s")
        assert_problem(c.get(f"/v1/tables/{table}/wait",
                             params={"spec": "datestamp=1", "timeout": "nan"}),
                       422, "query.timeout", "finite number")
        assert_problem(c.get(f"/v1/tables/{table}/wait", params={"spec": "datestamp"}),
                       422, "query.spec", "is not key=value")


class Sse:
    """A minimal SSE reader: (id, event, data) tuples; pings skipped."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.iter_lines()

    def __iter__(self) -> Iterator[tuple[int, str, str]]:
        fields: dict[str, str] = {}
        for line in self.lines:
            if not line:
                if "data" in fields:
                    yield int(fields["id"]), fields.get("event", ""), fields["data"]
                fields = {}
                continue
            if line.startswith(":"):
                continue
            key, _, value = line.partition(":")
            fields[key] = value[1:] if value.startswith(" ") else value


def read_events(c: httpx.Client, url: str, n: int, last_id: int | None,
                during: Any = None) -> list[int]:
    headers = {} if last_id is None else {"Last-Event-ID": str(last_id)}
    got: list[int] = []
    with c.stream("GET", url, headers=headers) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for event_id, _, _data in Sse(r):
            got.append(event_id)
            if during is not None and len(got) == 1:
                during()
            if len(got) == n:
                break
    return got


def test_stream_resumes_from_last_event_id_without_loss_or_duplicates(server: Server) -> None:
    table = server.table()
    other = server.table()
    db, name = table.split(".")
    odb, oname = other.split(".")
    pub = server.app.publisher
    pub.announce_partitions(db, name, [f"datestamp=1/region=r{i}" for i in range(5)])
    pub.send_mark_set_done(odb, oname, "datestamp=1")  # another table: never streamed
    url = f"/v1/tables/{table}/stream"
    timeout = httpx.Timeout(20)
    with server.client("read", timeout=timeout) as c:
        # Replay everything (cursor 0), then 3 live ones published while connected.
        first = read_events(c, url, 8, 0, during=lambda: [
            pub.send_mark_set_done(db, name, f"datestamp={i}") for i in range(3)])
        # Disconnected: 4 more, by Python and over HTTP.
        for i in range(2):
            pub.send_mark_set_done(db, name, f"datestamp=x{i}")
            pub.send_mark_set_done(odb, oname, f"datestamp=x{i}")
        with server.client("write") as w:
            w.post(f"/v1/tables/{table}/partitions",
                   json={"partitions": ["datestamp=2/region=a", "datestamp=2/region=b"]})
        second = read_events(c, url, 6, first[-1], during=lambda: [
            pub.send_mark_set_done(db, name, f"datestamp=y{i}") for i in range(2)])
    logged = table_event_ids(server, table)
    assert first + second == logged, (first, second, logged)
    assert len(set(first + second)) == len(logged) == 14


def table_event_ids(server: Server, table: str) -> list[int]:
    from sqlalchemy import text
    with server.app.store.engine.connect() as conn:
        db, name = table.split(".")
        rows = conn.execute(text(
            "SELECT e.event_id FROM pn_events e JOIN pn_tables t ON e.table_id = t.id "
            "WHERE t.db = :db AND t.name = :name ORDER BY e.event_id"), {"db": db, "name": name})
        return [int(r[0]) for r in rows]


def test_stream_without_cursor_starts_live_and_bad_cursor_is_422(server: Server) -> None:
    table = server.table()
    db, name = table.split(".")
    server.app.publisher.send_mark_set_done(db, name, "datestamp=old")
    with server.client("read", timeout=httpx.Timeout(20)) as c:
        with c.stream("GET", f"/v1/tables/{table}/stream") as r:
            new = server.app.publisher.send_mark_set_done(db, name, "datestamp=new")
            got = [next(iter(Sse(r)))]
        assert got[0][0] == new.event_id and got[0][1] == "PARTITION_DONE"
        assert_problem(c.get(f"/v1/tables/{table}/stream", headers={"Last-Event-ID": "abc"}),
                       422, "header.Last-Event-ID", "non-negative integer")


EXPECTATION = {"name": "daily", "specTemplate": "datestamp={{ ds_nodash }}",
               "cron": "0 0 * * *", "timezone": "UTC", "deadline": "06:00"}


@pytest.mark.parametrize(("change", "field", "fragment"), [
    ({"name": "Bad Name"}, "body.name", "expectation name 'Bad Name'"),
    ({"specTemplate": " "}, "body.specTemplate", "spec template is empty"),
    ({"specTemplate": "datestamp={{ nope }}"}, "body.specTemplate", "unknown variable"),
    ({"specTemplate": "day={{ ds_nodash }}"}, "body.specTemplate", "renders to 'day="),
    ({"cron": "daily"}, "body.cron", "5-field crontab"),
    ({"cron": "0 0 30 2 *"}, "body.cron", "schedule '0 0 30 2 *'"),
    ({"timezone": "Nowhere"}, "body.timezone", "not an IANA zone"),
    ({"deadline": "soon"}, "body.deadline", "deadline 'soon'"),
])
def test_a_bad_expectation_names_its_field(server: Server, change: dict[str, str], field: str,
                                           fragment: str) -> None:
    # Before: every one of these was named "body".
    table = server.table(keys=("datestamp",))
    with server.client("write") as c:
        assert_problem(c.post(f"/v1/tables/{table}/expectations",
                              json={**EXPECTATION, **change}), 422, field, fragment)
        assert c.get(f"/v1/tables/{table}/expectations").json()["expectations"] == []


@pytest.mark.parametrize("role", ["read"])
def test_expectations_over_http(server: Server, role: str) -> None:
    table = server.table()
    body = {"name": "daily", "specTemplate": "datestamp={{ ds_nodash }}", "cron": "0 0 * * *",
            "timezone": "Europe/Berlin", "deadline": "06:00"}
    with server.client("write") as w, server.client(role) as r:
        made = w.post(f"/v1/tables/{table}/expectations", json=body)
        assert made.status_code == 201, made.text
        assert made.json()["nextSpec"].startswith("datestamp=")
        assert [e["name"] for e in r.get(f"/v1/tables/{table}/expectations").json()[
            "expectations"]] == ["daily"]
        one = r.get(f"/v1/tables/{table}/expectations/daily").json()
        assert one["cron"] == "0 0 * * *" and one["verdicts"] == []
        assert r.get(f"/v1/tables/{table}/late").json()["late"] == []
        assert_problem(w.post(f"/v1/tables/{table}/expectations", json=body), 409,
                       "body.name", "already")
        assert_problem(w.post(f"/v1/tables/{table}/expectations",
                              json={**body, "name": "x", "timezone": "Nowhere"}),
                       422, "body.timezone", "not an IANA zone")
        assert_problem(r.post(f"/v1/tables/{table}/expectations", json=body), 403, None)
        assert_problem(r.get(f"/v1/tables/{table}/expectations/nope"), 404, "path.name",
                       "no expectation named 'nope'")
        assert w.delete(f"/v1/tables/{table}/expectations/daily").status_code == 200
        assert_problem(w.delete(f"/v1/tables/{table}/expectations/daily"), 404, "path.name")
