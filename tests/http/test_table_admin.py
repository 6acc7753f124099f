"""PATCH / DELETE /v1/tables/{table}: fixing a registered table over HTTP (issue 24)."""

from __future__ import annotations

from tests.http.support import Server
from tests.http.test_writes import assert_problem


def test_patch_changes_topic_retention_location_and_needs_admin(server: Server) -> None:
    table = server.table(keys=("ds",))
    with server.client("write") as c:
        assert_problem(c.patch(f"/v1/tables/{table}", json={"topic": "x.y"}), 403, None)
    with server.client() as c:
        r = c.patch(f"/v1/tables/{table}",
                    json={"topic": "fixed.topic", "retentionSeconds": 60, "location": "/d"})
        assert r.status_code == 200, r.text
        assert (r.json()["topic"], r.json()["retentionSeconds"], r.json()["location"]) == (
            "fixed.topic", 60, "/d")
        r = c.post(f"/v1/tables/{table}/set-done", json={"spec": "ds=1"})
        assert r.status_code in (201, 202), r.text
        last = server.app.store.log.max_event_id()
        assert [e.topic for e in server.app.store.log.events_after(last - 1)] == ["fixed.topic"]
        # Keys cannot change once a set-done is kept: 409 naming both key lists.
        assert_problem(c.patch(f"/v1/tables/{table}", json={"partitionKeys": ["day"]}), 409,
                       "body.partitionKeys", "['ds'] to ['day']", "1 retained set-done")


def test_patch_bad_input_names_field_and_value(server: Server) -> None:
    table = server.table(keys=("ds",))
    with server.client() as c:
        assert_problem(c.patch(f"/v1/tables/{table}", json={"retentionSeconds": 0}), 422,
                       "body.retentionSeconds")
        assert_problem(c.patch(f"/v1/tables/{table}", json={"colour": "red"}), 422,
                       "body.colour")
        assert_problem(c.patch(f"/v1/tables/{table}", json={"topic": "bad topic!"}), 422,
                       "body.topic", "bad topic!")
        assert_problem(c.patch("/v1/tables/nosuch.table", json={"topic": "a.b"}), 404,
                       "path.table", "nosuch.table")


def test_delete_unregisters_and_reports_what_was_removed(server: Server) -> None:
    table = server.table(keys=("ds",))
    with server.client() as c:
        assert c.post(f"/v1/tables/{table}/partitions", json={"partitions": ["ds=1"]}
                      ).status_code in (201, 202)
        r = c.delete(f"/v1/tables/{table}")
        assert r.status_code == 200, r.text
        assert (r.json()["removedPartitions"], r.json()["removedSetDone"]) == (1, 0)
        assert_problem(c.delete(f"/v1/tables/{table}"), 404, "path.table", "not registered")
        assert c.get(f"/v1/tables/{table}/history").status_code == 404


def test_a_relative_location_is_a_422_naming_body_location(server: Server) -> None:
    # Each process would resolve it against its own working directory.
    table = server.table(keys=("ds",))
    fresh = f"{table.split('.')[0]}.relative"
    with server.client() as c:
        for where in ("warehouse/orders", "./orders", "../orders"):
            assert_problem(c.post("/v1/tables", json={"table": fresh, "partitionKeys": ["ds"],
                                                      "location": where}),
                           422, "body.location", repr(where), "absolute path or a URI")
            assert_problem(c.patch(f"/v1/tables/{table}", json={"location": where}), 422,
                           "body.location", repr(where), "absolute path or a URI")
        assert c.get(f"/v1/tables/{fresh}").status_code == 404
        for where in ("s3://bucket/orders", "hdfs://nn:8020/orders", "file:/data/orders"):
            r = c.patch(f"/v1/tables/{table}", json={"location": where})
            assert r.status_code == 200 and r.json()["location"] == where, r.text
