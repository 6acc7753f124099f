"""The ``/ui`` events page's type filter offers every event type of the wire contract
(issue 19): read off the message union, so a type another change adds is offered
without touching the page. Checked against the union's JSON-schema discriminator,
a different path through pydantic than the page's."""

from __future__ import annotations

import re

import pydantic

from partition_notify.contract import messages
from tests.http.support import Server


def _contract() -> set[str]:
    schema = pydantic.TypeAdapter(messages.Message).json_schema()
    return set(schema["discriminator"]["mapping"])


def test_decode_knows_every_type_of_the_union() -> None:
    assert {"DROP_PARTITION", "COMMITS_MISSED", "PARTITION_DONE"} <= _contract()
    assert set(messages.EVENT_TYPES) == _contract()


def test_the_events_page_offers_every_type(server: Server) -> None:
    table = server.table()
    r = server.client().get(f"/ui/tables/{table}/events",
                            cookies={"pn_ui_token": server.tokens["read"]})
    assert r.status_code == 200, r.text[:300]
    select = r.text.split('name="type"', 1)[1].split("</select>", 1)[0]
    offered = set(re.findall(r'<option value="([A-Z_]+)"', select))
    assert offered == _contract()
    for t in sorted(_contract()):  # and each filters without a 422
        got = server.client().get(f"/ui/tables/{table}/events?type={t}",
                                  cookies={"pn_ui_token": server.tokens["read"]})
        assert got.status_code == 200, (t, got.text[:300])


def test_a_table_filter_with_a_control_character_is_a_422_naming_q(server: Server) -> None:
    """``/ui/tables?q=`` with a NUL: PostgreSQL refuses the byte in a string and the
    page answered 503 "store unavailable"; SQLite's LIKE stopped at it and listed every
    table. No table name holds a control character: the filter names its culprit."""
    table = server.table()
    cookies = {"pn_ui_token": server.tokens["read"]}
    with server.client(None, cookies=cookies) as c:
        for q in ("\x00", f"{table}\x00", "a\tb"):
            r = c.get("/ui/tables", params={"q": q})
            assert r.status_code == 422, (q, r.status_code, r.text[:300])
            assert r.json()["field"] == "query.q" and "control" in r.json()["detail"], r.text
        assert table in c.get("/ui/tables", params={"q": f" {table} "}).text
