"""A retry of a write answered 202 (saved, the broker did not confirm) is answered 202 again.

Issue 24: the stored response was the 201 of the transaction, so the retry
came back 201 without ``delivery`` although nothing had been delivered. A
real ``serve`` whose broker is unreachable (nothing listens on its port);
SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.http.support import Server, start_server
from tests.support.markers import uses
from tests.support.net import free_port


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
@uses("postgres", when=lambda param: param == "postgresql")
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    yield from start_server(request, PN_TRANSPORT_URL=f"stomp://127.0.0.1:{free_port()}",
                            PN_CONNECT_TIMEOUT_SECONDS="2")


def test_replay_of_a_202_is_a_202_with_delivery(server: Server) -> None:
    table = server.table()
    headers = {"Idempotency-Key": "pending-1"}
    with server.client("write") as c:
        first = c.post(f"/v1/tables/{table}/set-done", json={"spec": "datestamp=1"},
                       headers=headers)
        assert first.status_code == 202 and "delivery" in first.json(), first.text
        again = c.post(f"/v1/tables/{table}/set-done", json={"spec": "datestamp=1"},
                       headers=headers)
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert (again.status_code, again.json()) == (202, first.json())
