"""A stream cursor past the event log's last id was followed silently.

Found running docs/http-api.md's curl example as written on a new store
(``Last-Event-ID: 41``, the log at id 2): 200 and a stream that would skip every
event up to id 41 once they are logged. Such a cursor cannot come from this store
(ids never go down: the purge keeps each topic's last event), it is another store's
or one recreated since, as the Dagster sensor already says of its cursor. Now
``/v1/…/stream`` and ``/ui/…/stream`` answer 409 ``cursor-ahead`` naming the field, the
cursor and the log's last id; the last id itself still streams. Real serve.
"""

from __future__ import annotations

import httpx
import pytest

from tests.http.support import Server
from tests.http.test_writes import assert_problem


@pytest.mark.parametrize("path", ["/v1/tables/{t}/stream", "/ui/tables/{t}/stream"])
def test_a_cursor_past_the_log_is_409_naming_it(server: Server, path: str) -> None:
    table = server.table()
    db, name = table.split(".")
    top = server.app.publisher.send_mark_set_done(db, name, "datestamp=1").event_id
    url = path.format(t=table)
    role = "read"
    token = server.tokens[role]
    with httpx.Client(base_url=server.base, timeout=30,
                      headers={"Authorization": f"Bearer {token}"},
                      cookies={"pn_ui_token": token}) as c:
        for headers, params, field in (
                ({"Last-Event-ID": str(top + 40)}, {}, "header.Last-Event-ID"),
                ({}, {"last_event_id": str(top + 1)}, "query.last_event_id")):
            cursor = headers.get("Last-Event-ID") or params["last_event_id"]
            with c.stream("GET", url, headers=headers, params=params) as r:
                # Streamed: a 200 is an endless body, not something to read whole.
                assert r.status_code == 409, (headers, params, r.status_code)
                r.read()
            assert_problem(r, 409, field, f"cursor {cursor} is past the event log's last id",
                           "reconnect with ?last_event_id=0")
            assert r.json()["type"].endswith(":cursor-ahead"), r.json()
        with c.stream("GET", url, headers={"Last-Event-ID": str(top)}) as ok:
            assert ok.status_code == 200, ok.read()[:300]
