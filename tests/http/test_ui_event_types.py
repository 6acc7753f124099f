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
