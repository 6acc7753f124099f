"""``GET /v1/tables/{table}/set-done`` reads a bounded page, never the whole retention.

A table retains a set-done per sub-spec per run for its retention period (a year
of hourly region runs is ~26,000 rows); the route read and decoded all of them
per request, and applied ``since_event_id`` only afterwards.
"""

from __future__ import annotations

from typing import Any

from partition_notify.http.routes_read import HISTORY_PAGE, MAX_HISTORY_PAGE
from tests.http.support import Server
from tests.http.test_writes import assert_problem


def _pages(c: Any, url: str, **params: Any) -> list[list[int]]:
    pages: list[list[int]] = []
    while True:
        got = c.get(url, params=params)
        assert got.status_code == 200, got.text
        body = got.json()
        pages.append([m["eventId"] for m in body["setDone"]])
        if body["next"] is None:
            return pages
        params = {**params, "since_event_id": body["next"]["since_event_id"]}


def test_history_comes_in_pages_that_follow_on(server: Server) -> None:
    table = server.table()
    db, name = table.split(".")
    ids = [server.app.publisher.send_mark_set_done(db, name, f"datestamp={d}").event_id
           for d in range(5)]
    with server.client("read") as c:
        url = f"/v1/tables/{table}/set-done"
        pages = _pages(c, url, limit=2)
        assert pages == [ids[0:2], ids[2:4], ids[4:5]]
        assert _pages(c, url, limit=2, since_event_id=ids[1]) == [ids[2:4], ids[4:5]]
        assert _pages(c, url) == [ids]


def test_the_default_page_is_bounded(server: Server) -> None:
    table = server.table()
    db, name = table.split(".")
    for d in range(HISTORY_PAGE + 1):
        server.app.publisher.send_mark_set_done(db, name, f"datestamp={d}")
    with server.client("read") as c:
        body = c.get(f"/v1/tables/{table}/set-done").json()
        assert len(body["setDone"]) == HISTORY_PAGE
        assert body["next"] == {"since_event_id": body["setDone"][-1]["eventId"]}
        rest = c.get(f"/v1/tables/{table}/set-done", params=body["next"]).json()
        assert len(rest["setDone"]) == 1 and rest["next"] is None


def test_a_page_size_out_of_range_is_refused(server: Server) -> None:
    table = server.table()
    with server.client("read") as c:
        url = f"/v1/tables/{table}/set-done"
        assert_problem(c.get(url, params={"limit": 0}), 422, "query.limit",
                       "greater than or equal to 1")
        assert_problem(c.get(url, params={"limit": MAX_HISTORY_PAGE + 1}), 422, "query.limit",
                       f"less than or equal to {MAX_HISTORY_PAGE}")


def test_a_cursor_past_the_largest_event_id_is_refused(server: Server) -> None:
    """An event id is a signed 64-bit integer; one past it failed in the driver
    (OverflowError binding the parameter: a 500) instead of naming the query field."""
    table = server.table()
    with server.client("read") as c:
        url = f"/v1/tables/{table}/set-done"
        for too_big in (2**63, 10**23):
            assert_problem(c.get(url, params={"since_event_id": too_big}), 422,
                           "query.since_event_id", f"less than or equal to {2**63 - 1}")
        largest = c.get(url, params={"since_event_id": 2**63 - 1})
        assert largest.status_code == 200, largest.text
        assert largest.json()["setDone"] == []
