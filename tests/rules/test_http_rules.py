"""Rules over real HTTP, evaluated by the real ``serve`` behind it (SQLite, PostgreSQL).

An admin adds a cross-table rule; a writer's set-dones on both inputs make
that ``serve`` derive the target's set-done, which a subscriber waits for
(no sleep: the wait returns when it is published). Bad input is a 422
problem naming the field; a writer may not add rules.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.http.support import Server, start_server, unique_db
from tests.http.test_writes import assert_problem
from tests.support.markers import uses


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
@uses("postgres", when=lambda param: param == "postgresql")
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    yield from start_server(request, PN_RULES_INTERVAL_SECONDS="0.2")


def tables(server: Server) -> tuple[str, str, str]:
    db = unique_db()
    for t in ("orders", "returns"):
        server.app.publisher.register_table(db, t, ["datestamp", "region"])
    server.app.publisher.register_table(db, "daily", ["datestamp"])
    return f"{db}.orders", f"{db}.returns", f"{db}.daily"


def test_an_admin_adds_a_rule_and_serve_derives_the_set_done(server: Server) -> None:
    orders, returns, daily = tables(server)
    body = {"name": "inputs", "kind": "cross-table",
            "params": {"inputs": [orders, returns], "by": ["datestamp"]}}
    with server.client("write") as c:
        assert c.post(f"/v1/tables/{daily}/rules", json=body).status_code == 403
    with server.client("admin") as c:
        r = c.post(f"/v1/tables/{daily}/rules", json=body)
        assert r.status_code == 201, r.text
        assert r.json()["params"] == {"inputs": [orders, returns], "by": ["datestamp"]}
    with server.client("write") as c:
        for t in (orders, returns):
            r = c.post(f"/v1/tables/{t}/set-done", json={"spec": "datestamp=20260101"})
            assert r.status_code == 201, r.text
    db, name = daily.split(".")
    with server.app.subscriber() as sub:
        msg = sub.wait_for_set_done(db, name, "datestamp=20260101", timeout=60)
    assert msg.derived_from is not None and msg.derived_from.rule == "inputs"
    with server.client("read") as c:
        listed = c.get(f"/v1/tables/{daily}/rules").json()["rules"]
        assert [r["name"] for r in listed] == ["inputs"]
        dry = c.get(f"/v1/tables/{daily}/rules/inputs/dry-run").json()
        assert [d["spec"] for d in dry["wouldDerive"]] == ["datestamp=20260101"]
        assert dry["wouldDerive"][0]["coveredNow"] is True
    with server.client("admin") as c:
        assert c.delete(f"/v1/tables/{daily}/rules/inputs").status_code == 200
        assert_problem(c.delete(f"/v1/tables/{daily}/rules/inputs"), 404, "path.name",
                       "no rule named 'inputs'")


def test_bad_rules_are_422_problems_naming_the_field(server: Server) -> None:
    orders, _, daily = tables(server)
    with server.client("admin") as c:
        url = f"/v1/tables/{daily}/rules"
        assert_problem(c.post(url, json={"name": "x", "kind": "any-of"}), 422, "body.kind",
                       "rule kind 'any-of'", "expected all-of or calendar or cross-table")
        assert_problem(c.post(url, json={"name": "x", "kind": "cross-table", "params": {
            "inputs": [orders], "by": ["hour"]}}), 422, "body.params.by", "rule by ['hour']",
                       "partition keys of")
        assert_problem(c.post(url, json={"name": "x", "kind": "cross-table", "params": {
            "inputs": ["nodb.none"], "by": ["datestamp"]}}), 404, "body.params.inputs")
        assert_problem(c.post(url, json={"name": "Bad Name", "kind": "cross-table"}), 422,
                       "body.name", "rule name 'Bad Name'")
        assert c.get(url).json()["rules"] == []


def test_a_quiet_rule_over_http_and_its_bad_input(server: Server) -> None:
    orders, _, _ = tables(server)
    with server.client("admin") as c:
        bad = {"name": "settled", "kind": "quiet", "params": {"by": ["datestamp"]}}
        assert_problem(c.post(f"/v1/tables/{orders}/rules", json=bad), 422,
                       "body.params.quietSeconds", "quietSeconds")
        good = {"name": "settled", "kind": "quiet",
                "params": {"by": ["datestamp"], "quietSeconds": 1}}
        r = c.post(f"/v1/tables/{orders}/rules", json=good)
        assert r.status_code == 201, r.text
    db, name = orders.split(".")
    server.app.publisher.announce_partitions(db, name, [{"datestamp": "20260301",
                                                         "region": "us"}])
    with server.app.subscriber() as sub:  # serve's rules job fires it a second later
        msg = sub.wait_for_set_done(db, name, "datestamp=20260301", timeout=60)
    assert msg.derived_from is not None and msg.derived_from.kind == "quiet"


def test_a_parameter_the_kind_does_not_read_is_refused_and_nothing_stored(
        server: Server) -> None:
    # Before session 18: a typo ("timeZone") was dropped and the rule stored with the
    # default UTC; another kind's option was ignored; "fromNow": "yes" was true.
    orders, _, daily = tables(server)
    url = f"/v1/tables/{daily}/rules"
    same = {"key": "datestamp", "keyFormat": "YYYYMMDD", "into": "datestamp",
            "intoFormat": "YYYYMM"}
    with server.client("admin") as c:
        # A month derived into the key the days are counted in: refused, naming both.
        assert_problem(c.post(url, json={"name": "cal", "kind": "calendar", "params": same}),
                       422, "body.params.into", "rule into 'datestamp'",
                       "other than key 'datestamp'")
    server.app.publisher.register_table(daily.split(".")[0], "days", ["month", "datestamp"])
    url = f"/v1/tables/{daily.split('.')[0]}.days/rules"
    calendar = {**same, "into": "month"}
    with server.client("admin") as c:
        assert_problem(c.post(url, json={"name": "cal", "kind": "calendar", "params": {
            **calendar, "timeZone": "Europe/Berlin"}}), 422, "body.params.timeZone",
            "no 'timeZone' for a calendar rule", "timezone")
        assert_problem(c.post(url, json={"name": "q", "kind": "quiet", "params": {
            "by": ["datestamp"], "quietSeconds": 5, "values": ["a"]}}), 422,
            "body.params.values", "no 'values' for a quiet rule")
        assert_problem(c.post(url, json={"name": "x", "kind": "cross-table", "params": {
            "inputs": [orders], "by": ["datestamp"]}, "fromNow": "yes"}), 422, "body.fromNow")
        assert c.get(url).json()["rules"] == []
        r = c.post(url, json={"name": "cal", "kind": "calendar",
                              "params": {**calendar, "timezone": "Europe/Berlin"}})
        assert r.status_code == 201, r.text
        assert r.json()["params"]["timezone"] == "Europe/Berlin"


def test_a_long_bad_list_is_quoted_as_an_excerpt_with_its_count(server: Server) -> None:
    # Before: the 422 echoed all 20,000 values (the detail was 188,978 characters).
    orders, _, _ = tables(server)
    values = [f"v{i}" for i in range(20_000)]
    url = f"/v1/tables/{orders}/rules"
    with server.client("admin") as c:
        r = c.post(url, json={"name": "x", "kind": "all-of", "params": {
            "key": "region", "values": values, "by": ["datestamp"]}})
        assert len(r.json()["detail"]) < 120 + 200, f"{len(r.text)}: {r.text[:300]}"
        assert_problem(r, 422, "body.params.values", "rule values ['v0', 'v1',", "…",
                       "(20000 items)", "expected 1 to 1000 distinct values")
        r = c.post(url, json={"name": "x", "kind": "quiet", "params": {
            "by": values, "quietSeconds": 5}})
        assert len(r.json()["detail"]) < 120 + 200, f"{len(r.text)}: {r.text[:300]}"
        assert_problem(r, 422, "body.params.by", "(20000 items)")
        assert c.get(url).json()["rules"] == []
