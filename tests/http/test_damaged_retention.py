"""HTTP readers of the retention table skip a damaged newest row (no 500, no wrong answer).

``set-done/covering``, ``wait`` and the ``set-done`` history answer from the
valid rows; the damaged row (tests/store/test_damaged_retention.py writes it
with real SQL) is logged once by ``serve``, with its id.
"""

from __future__ import annotations

import json

import pytest

from tests.http.support import Server
from tests.store.test_damaged_retention import DAMAGE, insert_damaged


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_covering_wait_and_history_answer_from_the_valid_row(server: Server,
                                                             damage: str) -> None:
    name = server.table()
    db, table = name.split(".")
    good = server.app.publisher.send_mark_set_done(db, table, "datestamp=1", revision=1)
    info = server.app.store.catalog.get_table(db, table)
    body = server.app.store.retention.set_done_covering(info, [good.spec])[0]
    row_id = insert_damaged(server.app.store.engine, good, info.id, DAMAGE[damage](body))
    with server.client("read") as c:
        for _ in range(2):
            r = c.get(f"/v1/tables/{name}/set-done/covering",
                      params={"spec": "datestamp=1/region=us"})
            assert r.status_code == 200, r.text
            assert r.json()["done"] is True and r.json()["setDone"] == json.loads(body)
            r = c.get(f"/v1/tables/{name}/wait",
                      params={"spec": "datestamp=1/region=us", "timeout": "5"})
            assert r.status_code == 200, r.text
            assert r.json() == json.loads(body)
            r = c.get(f"/v1/tables/{name}/set-done")
            assert r.status_code == 200, r.text
            assert r.json()["setDone"] == [json.loads(body)]
    logged = [line for line in server.serve.text().splitlines() if f"row {row_id} " in line]
    assert len(logged) == 1, logged
    assert name in logged[0], logged
