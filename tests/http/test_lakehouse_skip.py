"""POST /v1/tables/{table}/lakehouse/skip: the HTTP twin of ``partition-notify lakehouse
skip`` (the follower side: tests/lakehouse/test_skip_commit.py). Admin only; only the
commit the table is stopped on; recorded with the token's name."""

from __future__ import annotations

from pathlib import Path

from partition_notify.writers.commit_refusals import CommitRefusals
from partition_notify.writers.lakehouse.store import LakehouseTables

from tests.http.support import Server
from tests.http.test_writes import assert_problem

OWNER = "test-follower"


def stopped_table(server: Server, tmp: Path) -> str:
    """A Delta table whose follower (this test, holding the lease) stopped on version 1."""
    table = server.table()
    db, name = table.split(".")
    info = server.app.publisher.table(db, name)
    tables = LakehouseTables(server.app.store)
    tables.register(info, "delta", location=str(tmp / name), start=0)
    assert tables.claim(info.id, OWNER, 600)  # serve's own follower keeps off it
    tables.stop(
        info.id,
        OWNER,
        1,
        "partition #0: value of partition key 'region' is 1100 characters; at most 1024 allowed",
    )
    return table


def test_only_an_admin_skips_only_the_stopped_commit(server: Server, tmp_path: Path) -> None:
    table = stopped_table(server, tmp_path)
    path = f"/v1/tables/{table}/lakehouse/skip"
    with server.client(None, cookies={"pn_ui_token": server.tokens["admin"]}) as c:
        page = c.get("/ui/ops")
    assert page.status_code == 200, page.text
    stopped = page.text.split('id="stopped"', 1)[1].split("</table>", 1)[0]
    assert f"lakehouse skip {table} --version 1" in stopped and "1100 characters" in stopped
    with server.client("write") as c:
        assert_problem(c.post(path, json={"version": 1}), 403, None)
    with server.client() as c:
        assert_problem(
            c.post(path, json={"version": 2}), 409, "body.version", "stopped on commit 1, not 2"
        )
        assert_problem(c.post(path, json={"version": "1"}), 422, "body.version")
        assert_problem(c.post(path, json={"version": -1}), 422, "body.version")
        r = c.post(path, json={"version": 1})
        assert r.status_code in (201, 202), r.text
        body = r.json()
        assert (body["table"], body["skipped"], body["afterRevision"]) == (table, 1, 0)
        assert body["commitsMissed"]["eventType"] == "COMMITS_MISSED"
        assert "1024" in body["commitsMissed"]["reason"]
        # Skipped: the table goes on; a second skip finds nothing to skip.
        assert_problem(
            c.post(path, json={"version": 1}), 409, "body.version", "not stopped on a commit"
        )
    info = server.app.publisher.table(*table.split("."))
    followed = LakehouseTables(server.app.store).get(info.id)
    assert followed is not None and (followed.cursor, followed.stopped_at) == (1, None)
    audit = [r for r in CommitRefusals(server.app.store).latest(50) if r.table == table]
    assert [(r.status, r.principal) for r in audit] == [("skipped", "t-admin")]
    # The operations page lists it apart from the Spark commits' refusals.
    with server.client(None, cookies={"pn_ui_token": server.tokens["admin"]}) as c:
        page = c.get("/ui/ops")
    assert page.status_code == 200, page.text
    skipped = page.text.split('id="skipped"', 1)[1].split("</table>", 1)[0]
    assert table not in page.text.split('id="stopped"', 1)[1].split("</table>", 1)[0]
    assert table in skipped and "delta commit 1 skipped by t-admin" in skipped


def test_a_table_not_followed_is_a_422_naming_it(server: Server) -> None:
    table = server.table()
    with server.client() as c:
        assert_problem(
            c.post(f"/v1/tables/{table}/lakehouse/skip", json={"version": 1}),
            422,
            "path.table",
            "not followed as an Iceberg or Delta table",
        )
        assert_problem(
            c.post("/v1/tables/no.such/lakehouse/skip", json={"version": 1}), 404, "path.table"
        )


def test_the_ops_page_skips_the_stopped_commit_with_its_form(
    server: Server, tmp_path: Path
) -> None:
    """/ui/ops's form: admin, same origin, CSRF token, as the dead-letter forms."""
    import hashlib
    import hmac

    import httpx

    table = stopped_table(server, tmp_path)
    admin = server.tokens["admin"]
    csrf = hmac.new(admin.encode(), b"partition-notify /ui csrf", hashlib.sha256).hexdigest()
    form = {"csrf": csrf, "table": table, "version": "1"}
    with httpx.Client(base_url=server.base, cookies={"pn_ui_token": admin}, timeout=30) as c:
        page = c.get("/ui/ops").text
        assert f'name="table" value="{table}"' in page
        assert c.post("/ui/ops/lakehouse-skip", data={**form, "csrf": "x"}).status_code == 403
        assert_problem(
            c.post("/ui/ops/lakehouse-skip", data={**form, "version": "2"}),
            409,
            "form.version",
            "stopped on commit 1, not 2",
        )
        assert_problem(
            c.post("/ui/ops/lakehouse-skip", data={**form, "version": "1e3"}),
            422,
            "form.version",
            "'1e3'",
        )
        r = c.post("/ui/ops/lakehouse-skip", data=form)
        assert r.status_code == 303, r.text
    with httpx.Client(
        base_url=server.base, cookies={"pn_ui_token": server.tokens["write"]}, timeout=30
    ) as c:
        assert c.post("/ui/ops/lakehouse-skip", data=form).status_code == 403
    info = server.app.publisher.table(*table.split("."))
    followed = LakehouseTables(server.app.store).get(info.id)
    assert followed is not None and (followed.cursor, followed.stopped_at) == (1, None)


def _stopped_loading(server: Server, tmp_path: Path, resume_at: int, reason: str) -> str:
    """A followed Delta table at cursor 4, stopped unable to load it; resumes at ``resume_at``."""
    table = server.table()
    db, name = table.split(".")
    info = server.app.publisher.table(db, name)
    tables = LakehouseTables(server.app.store)
    tables.register(info, "delta", location=str(tmp_path / name), start=4)
    assert tables.claim(info.id, OWNER, 600)
    tables.stop_loading(info.id, OWNER, 4, resume_at, reason)
    return table


def test_a_table_that_cannot_be_loaded_offers_the_repair_not_a_skip(
    server: Server, tmp_path: Path
) -> None:
    """Stopped at its cursor (writers/lakehouse: nothing of the table can be read, so no
    commit to skip to): the page says to repair it and offers no Skip; a skip is a 409."""
    table = _stopped_loading(server, tmp_path, 4, "the table cannot be loaded (OSError: gone)")
    with server.client(None, cookies={"pn_ui_token": server.tokens["admin"]}) as c:
        page = c.get("/ui/ops")
    assert page.status_code == 200, page.text
    row = page.text.split('id="stopped"', 1)[1].split("</table>", 1)[0]
    assert table in row and "OSError: gone" in row and "repair" in row.lower()
    assert f'name="table" value="{table}"' not in row and "lakehouse skip" not in row
    with server.client() as c:
        assert_problem(
            c.post(f"/v1/tables/{table}/lakehouse/skip", json={"version": 4}),
            409,
            "body.version",
            "cannot be loaded at commit 4",
        )


def test_a_skip_to_where_a_table_resumes_says_every_commit_it_skipped(
    server: Server, tmp_path: Path
) -> None:
    """Stopped unable to load the table at version 4, on version 7 where it resumes: the
    skip's COMMITS_MISSED covers 5..7, and the answer and the page's flash say so."""
    import hashlib
    import hmac

    import httpx

    table = _stopped_loading(server, tmp_path, 7, "version 4 cannot be loaded (corrupt)")
    with server.client() as c:
        r = c.post(f"/v1/tables/{table}/lakehouse/skip", json={"version": 7})
    assert r.status_code in (201, 202), r.text
    body = r.json()
    # Before: only "skipped": 7, as though version 7 alone had been skipped.
    assert (body["skippedFrom"], body["skipped"], body["afterRevision"]) == (5, 7, 4)
    assert body["commitsMissed"]["reason"].startswith("delta commits 5..7 skipped by t-admin")

    info = server.app.publisher.table(*table.split("."))
    LakehouseTables(server.app.store).stop_loading(
        info.id, OWNER, 7, 9, "version 7 cannot be loaded (corrupt)")
    admin = server.tokens["admin"]
    csrf = hmac.new(admin.encode(), b"partition-notify /ui csrf", hashlib.sha256).hexdigest()
    form = {"csrf": csrf, "table": table, "version": "9"}
    with httpx.Client(base_url=server.base, cookies={"pn_ui_token": admin}, timeout=30) as c:
        r = c.post("/ui/ops/lakehouse-skip", data=form, follow_redirects=True)
    assert r.status_code == 200, r.text
    assert f"Done: skipped delta commits 8..9 of {table}." in r.text, r.text


def test_new_keys_of_a_followed_table_are_checked_against_the_table(
        server: Server, tmp_path: Path) -> None:
    """PATCH partitionKeys of a table serve follows: keys the table's commits cannot give
    are a 422 naming the field (they would stop the follower at the next commit); a
    table that cannot be read to check them is a 503, never a 500."""
    from deltalake import write_deltalake

    from tests.lakehouse.helpers import delta_rows

    tables = LakehouseTables(server.app.store)
    location = str(tmp_path / "orders")
    write_deltalake(location, delta_rows(("20260101", "us", 1)),
                    partition_by=["datestamp", "region"])
    readable = server.table()  # keys datestamp, region: the table's partition columns
    info = server.app.publisher.table(*readable.split("."))
    tables.register(info, "delta", location=location, start=0)
    unreadable = server.table()
    info = server.app.publisher.table(*unreadable.split("."))
    tables.register(info, "delta", location="nosuchscheme://b/t", start=0)
    with server.client() as c:
        assert_problem(c.patch(f"/v1/tables/{readable}", json={"partitionKeys": ["datestamp"]}),
                       422, "body.partitionKeys", "partition columns")
        assert_problem(c.patch(f"/v1/tables/{unreadable}",
                               json={"partitionKeys": ["datestamp"]}),
                       503, "body.partitionKeys", "cannot be read")
        ok = c.patch(f"/v1/tables/{readable}", json={"partitionKeys": ["region", "datestamp"]})
        assert ok.status_code == 200, ok.text
        # Its location is the follower's _delta_log: it does not move under it.
        assert_problem(c.patch(f"/v1/tables/{readable}", json={"location": "/elsewhere"}),
                       409, "body.location", location)
