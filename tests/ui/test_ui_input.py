"""``/ui`` pages and stream against a real ``serve``: what a table's history and a
caller's input may hold must not be a 500, and the stream obeys revocation like the
API's.

No browser: status codes, the page's text and the stream's bytes are the point.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from deltalake import DeltaTable, write_deltalake
from partition_notify.writers.lakehouse.follower import Follower
from partition_notify.writers.lakehouse.store import LakehouseTables

from partition_notify.core.limits import MAX_INT64
from partition_notify.http.store import HttpStore
from tests.http.support import Server, start_server, unique_db
from tests.lakehouse.helpers import delta_rows


@pytest.fixture(scope="module", params=["sqlite"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    # Streams re-check their token every half second, as the API's revocation test does.
    yield from start_server(request, PN_HTTP_STREAM_AUTH_RECHECK_SECONDS="0.5")


def ui(server: Server, role: str = "read") -> httpx.Client:
    return httpx.Client(base_url=server.base, timeout=30,
                        cookies={"pn_ui_token": server.tokens[role]})


def gap_table(server: Server, tmp_path: Path) -> str:
    """A Delta table whose log lost a version before it was read: a COMMITS_MISSED."""
    db = unique_db()
    info = server.app.publisher.register_table(db, "orders", ["datestamp", "region"])
    location = str(tmp_path / "orders")
    LakehouseTables(server.app.store).register(info, "delta", location=location)
    follower = Follower(server.app.publisher, "delta")
    follower.run_once()  # follows it from its first version, and holds its lease
    for day in ("20260101", "20260102", "20260103"):
        write_deltalake(location, delta_rows((day, "us", 1)), mode="append",
                        partition_by=["datestamp", "region"])
    assert DeltaTable(location).version() == 2
    (tmp_path / "orders" / "_delta_log" / f"{1:020d}.json").unlink()
    assert follower.run_once().gaps == 1
    return info.qualified


def test_the_events_page_of_a_table_with_a_gap(server: Server, tmp_path: Path) -> None:
    table = gap_table(server, tmp_path)
    with ui(server) as client:
        for query in ("", "?type=COMMITS_MISSED", "?spec=datestamp%3D20260101"):
            r = client.get(f"/ui/tables/{table}/events{query}")
            # Before: 500, AttributeError: CommitsMissedMessage has no partition_spec.
            assert r.status_code == 200, (query, r.text[:300])
        page = client.get(f"/ui/tables/{table}/events").text
        assert "<td>COMMITS_MISSED</td>" in page


@pytest.mark.parametrize("path", [
    "/events?before={n}",
    "/events/{n}.json",
])
def test_event_ids_beyond_64_bits_are_refused_not_a_500(server: Server, path: str) -> None:
    table = server.table()
    with ui(server) as client:
        for n in (MAX_INT64 + 1, 10**30):
            r = client.get(f"/ui/tables/{table}" + path.format(n=n))
            assert r.status_code == 422, (n, r.status_code, r.text[:300])
            assert r.headers["content-type"].startswith("application/problem+json")


def test_an_event_the_table_does_not_have_is_a_404_naming_the_path_field(
        server: Server) -> None:
    # Before: the problem body had no "field" (every other 404 of a path names its own).
    table = server.table()
    with ui(server) as client:
        r = client.get(f"/ui/tables/{table}/events/{MAX_INT64}.json")
    assert r.status_code == 404, r.text[:300]
    assert r.json()["field"] == "path.event_id", r.json()
    r = httpx.get(f"{server.base}/ui/static/nope.css", timeout=30)
    assert (r.status_code, r.json()["field"]) == (404, "path.name"), r.text[:300]


def test_a_stream_resuming_after_an_id_beyond_64_bits_is_refused(server: Server) -> None:
    table = server.table()
    with ui(server) as client:
        for headers, query in (({"Last-Event-ID": str(MAX_INT64 + 1)}, ""),
                               ({}, f"?last_event_id={10**30}")):
            r = client.get(f"/ui/tables/{table}/stream{query}", headers=headers)
            # Before: 200, then the stream died on the first read (OverflowError).
            assert r.status_code == 422, (headers, query, r.status_code, r.text[:300])


def test_a_revoked_tokens_stream_ends(server: Server) -> None:
    table = server.table()
    db, name = table.split(".")
    store = HttpStore(server.app.store)
    token = store.create_token(f"ui-{db}", "read")[1]
    got: list[str] = []

    def follow() -> None:
        with httpx.Client(base_url=server.base, timeout=15, cookies={"pn_ui_token": token}) \
                as client, client.stream("GET", f"/ui/tables/{table}/stream") as r:
            assert r.status_code == 200
            got.extend(r.iter_lines())  # until the server ends the stream

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    time.sleep(1.0)  # connected and listening
    store.revoke_token(f"ui-{db}")
    time.sleep(1.5)  # three re-checks
    server.app.publisher.announce_partitions(db, name, ["datestamp=20260101/region=after"])
    reader.join(10)

    # Before: the stream went on after the revocation and delivered the partition.
    assert not reader.is_alive(), "the stream of a revoked token was still open"
    assert not any("after" in line for line in got), got


def test_admin_forms_refuse_bad_input_not_a_500(server: Server) -> None:
    import hashlib
    import hmac

    table = server.table()
    token = server.tokens["admin"]
    csrf = hmac.new(token.encode(), b"partition-notify /ui csrf", hashlib.sha256).hexdigest()
    with ui(server, "admin") as client:
        for zone in ("America", "A" * 5000):  # a tzdata folder; a name past a file name
            r = client.post(f"/ui/tables/{table}/expectations", data={
                "csrf": csrf, "name": "daily", "spec_template": "datestamp={{ ds_nodash }}",
                "cron": "0 0 * * *", "timezone": zone, "deadline": "06:00"})
            assert r.status_code == 422, (zone[:20], r.status_code, r.text[:300])
        for path in ("/ui/ops/dead-letters", "/ui/ops/push-letters"):
            # 19 digits, past a signed 64-bit id: an OverflowError before.
            r = client.post(path, data={"csrf": csrf, "action": "redrive",
                                        "event_id": str(MAX_INT64 + 1)})
            assert r.status_code == 422, (path, r.status_code, r.text[:300])
