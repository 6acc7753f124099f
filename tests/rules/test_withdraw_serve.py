"""Withdrawals through real ``serve`` processes (SQLite, PostgreSQL): HTTP, CLI, two serves.

A writer withdraws over HTTP; the ``serve`` behind it retracts the derived
set-done (``PARTITION_DONE_RETRACTED``, awaited on a live subscription, no
sleep), ``is-set-done`` answers not done; re-announcing derives it again.
Two ``serve`` processes on one store publish one retraction per withdrawal.
Bad input is a 4xx problem naming the field, or one CLI line and exit 1/2.
"""

from __future__ import annotations

import queue
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from partition_notify.subscriber import Subscriber

from partition_notify.app import App
from partition_notify.contract import (
    AnyMessage,
    PartitionDoneRetractedMessage,
    SetDoneMessage,
)
from tests.http.support import HttpServe, Server, start_server, unique_db
from tests.http.test_writes import assert_problem
from tests.rules.test_cli_and_restart import cli, one_line_error
from tests.rules.test_withdraw import retractions
from tests.support.markers import uses
from tests.support.net import wait_until

DEADLINE = 60.0


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
@uses("postgres", when=lambda param: param == "postgresql")
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    yield from start_server(request, PN_RULES_INTERVAL_SECONDS="0.2")


def regions_table(app: App) -> tuple[str, str]:
    db = unique_db()
    app.publisher.register_table(db, "orders", ["datestamp", "region"])
    app.rules.add(f"{db}.orders", name="regions", kind="all-of",
                  params={"key": "region", "values": ["us", "eu"], "by": ["datestamp"]})
    return db, "orders"


def next_of(inbox: queue.Queue[AnyMessage], kind: type, spec_: str) -> AnyMessage:
    """The next message of ``kind`` for ``spec_`` the live subscription delivers."""
    while True:
        msg = inbox.get(timeout=DEADLINE)
        derived = not isinstance(msg, SetDoneMessage) or msg.derived_from is not None
        if isinstance(msg, kind) and getattr(msg, "spec", None) == spec_ and derived:
            return msg


def test_withdraw_over_http_retracts_and_re_announce_derives_again(server: Server) -> None:
    db, name = regions_table(server.app)
    table = f"{db}.{name}"
    inbox: queue.Queue[AnyMessage] = queue.Queue()
    with server.app.subscriber() as sub:
        following = sub.subscribe(table, inbox.put, history=False)
        try:
            withdraw_and_restate(server, sub, table, inbox)
        finally:
            following.close()


def withdraw_and_restate(server: Server, sub: Subscriber, table: str,
                         inbox: queue.Queue[AnyMessage]) -> None:
    db, name = table.split(".")
    with server.client("write") as c:
        for r in ("us", "eu"):
            assert c.post(f"/v1/tables/{table}/partitions", json={
                "partitions": [f"datestamp=20260101/region={r}"]}).status_code == 201
    first = next_of(inbox, SetDoneMessage, "datestamp=20260101")
    with server.client("read") as c:
        url = f"/v1/tables/{table}/set-done/covering?spec=datestamp=20260101/region=us"
        assert c.get(url).json()["done"] is True
    with server.client("write") as c:
        r = c.post(f"/v1/tables/{table}/withdrawals", json={
            "spec": "datestamp=20260101/region=eu", "reason": "bad data: duplicates"})
        assert r.status_code == 201, r.text
        withdrawn = r.json()["withdrawn"]
        assert withdrawn["eventType"] == "PARTITION_WITHDRAWN"
        assert withdrawn["partitions"] == [{"datestamp": "20260101", "region": "eu"}]
        assert [s["eventId"] for s in withdrawn["setDones"]] == [first.event_id]
    retracted = next_of(inbox, PartitionDoneRetractedMessage, "datestamp=20260101")
    assert isinstance(retracted, PartitionDoneRetractedMessage)
    assert retracted.rule == "regions" and retracted.retracted_event_id == first.event_id
    assert [(i.value, i.event_id) for i in retracted.withdrawn] == [
        ("eu", withdrawn["eventId"])]
    with server.client("read") as c:
        assert c.get(url).json()["done"] is False
    with pytest.raises(Exception, match="no set-done covering"):
        sub.wait_for_set_done(db, name, "datestamp=20260101", timeout=0)
    with server.client("write") as c:  # restatement: announce again at a new revision
        assert c.post(f"/v1/tables/{table}/partitions", json={
            "partitions": ["datestamp=20260101/region=eu"], "revision": 2}).status_code == 201
    second = next_of(inbox, SetDoneMessage, "datestamp=20260101")
    assert second.event_id > retracted.event_id
    with server.client("read") as c:
        assert c.get(url).json()["done"] is True


def test_bad_withdrawals_are_4xx_problems(server: Server) -> None:
    table = server.table()
    url = f"/v1/tables/{table}/withdrawals"
    with server.client("read") as c:
        assert c.post(url, json={"spec": "datestamp=1", "reason": "x"}).status_code == 403
    with server.client("write") as c:
        assert_problem(c.post(url, json={"spec": "datestamp=1"}), 422, "body.reason")
        assert_problem(c.post(url, json={"spec": "datestamp=1", "reason": ""}), 422,
                       "body.reason")
        assert_problem(c.post(url, json={"spec": "datestamp=1", "reason": "x" * 1001}), 422,
                       "body.reason")
        # Blank once stripped, or with a NUL: named body.reason (was body.spec before
        # session 18, the publisher's check running inside the spec's scope).
        for reason in ("   ", "bad\u0000data"):
            assert_problem(c.post(url, json={"spec": "datestamp=1", "reason": reason}), 422,
                           "body.reason")
        assert_problem(c.post(url, json={"spec": "hour=3", "reason": "bad"}), 422, "body.spec",
                       "hour")
        assert_problem(c.post(url, json={"spec": 7, "reason": "bad"}), 422, "body.spec")
        assert_problem(c.post(url, json={"spec": "datestamp=1", "reason": "x", "extra": 1}),
                       422, "body.extra")
        assert_problem(c.post(f"/v1/tables/{unique_db()}.nope/withdrawals",
                              json={"spec": "datestamp=1", "reason": "x"}), 404, None)


def test_cli_withdraw_and_its_bad_input(tmp_path: Path) -> None:
    from partition_notify.app import build_app

    url = f"sqlite:///{tmp_path}/store.db"
    app = build_app(store_url=url, transport_url="embedded://")
    try:
        app.publisher.register_table("sales", "orders", ["datestamp", "region"])
        app.publisher.announce_partitions("sales", "orders", ["datestamp=1/region=us"])
        app.publisher.send_mark_set_done("sales", "orders", "datestamp=1")
        done = cli(url, "withdraw", "sales.orders", "datestamp=1", "--reason", "bad data")
        assert done.returncode == 0, done.stderr
        assert '"eventType":"PARTITION_WITHDRAWN"' in done.stdout
        assert "withdrew 1 partition(s) and 1 set-done(s)" in done.stderr
        one_line_error(cli(url, "withdraw", "sales.orders", "datestamp=1"), 2,
                       "--reason")
        one_line_error(cli(url, "withdraw", "sales.orders", "hour=1", "--reason", "x"), 1,
                       "hour")
        one_line_error(cli(url, "withdraw", "sales.orders", "datestamp=1", "--reason", " "), 1,
                       "withdrawal reason of sales.orders must be 1")
        one_line_error(cli(url, "withdraw", "sales.nope", "datestamp=1", "--reason", "x"), 1,
                       "sales.nope")
    finally:
        app.close()


def test_two_serves_racing_publish_one_retraction_per_withdrawal(server: Server) -> None:
    app = server.app
    other = HttpServe(app.settings.store_url, Path(tempfile.mkdtemp()) / "serve2.log",
                      env_extra={"PN_RULES_INTERVAL_SECONDS": "0.2"}).start()
    try:
        db, name = regions_table(app)
        days = [f"202602{d:02d}" for d in range(1, 7)]
        for ds in days:
            for r in ("us", "eu"):
                app.publisher.announce_partitions(db, name, [f"datestamp={ds}/region={r}"])
        def cursor() -> int:
            return app.rules.rules(f"{db}.{name}")[0].cursor_event_id

        end = app.store.log.max_event_id()
        wait_until(lambda: cursor() >= end, DEADLINE, "the serves to derive")
        for ds in days:
            app.publisher.withdraw(db, name, f"datestamp={ds}/region=us", reason="bad")
        last = app.store.log.max_event_id()
        wait_until(lambda: cursor() >= last, DEADLINE, "the serves to read every withdrawal")
        mine = [m for m in retractions(app) if m.db == db]
        assert sorted(m.spec for m in mine) == [f"datestamp={ds}" for ds in days]
    finally:
        assert other.stop() == 0, other.text()[-2000:]
