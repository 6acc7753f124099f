"""Spark commits ``POST /v1/commits`` rejected or ignored keep their reason for
``/ui/ops`` (issue 19), on SQLite and PostgreSQL: a real serve, a real HTTP client.

The table of reasons is bounded: a write keeps at most ``MAX_ROWS`` and
serve's housekeeping forgets rows older than the Spark commit retention.
"""

from __future__ import annotations

import html
import re
import uuid

import pytest
from partition_notify.writers import commit_refusals
from partition_notify.writers.commit_refusals import CommitRefusals

from partition_notify.app import build_app
from partition_notify.serve.housekeeping import purge_all
from tests.http.support import Server, unique_db
from tests.spark_protocol.test_spool_trust import manifest


def _refused_rows(server: Server) -> list[str]:
    """The text of each row of /ui/ops's table of refusals, as the admin sees it."""
    r = server.client().get("/ui/ops", cookies={"pn_ui_token": server.tokens["admin"]})
    assert r.status_code == 200, r.text[:500]
    body = r.text.split('<table id="refused">', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)[1:]  # [0] is the header
    return [html.unescape(re.sub(r"<[^>]+>", " ", row)) for row in rows]


def test_rejected_and_ignored_commits_keep_their_reason(server: Server) -> None:
    db, base = unique_db(), f"file:/warehouse/{uuid.uuid4().hex}"
    server.app.publisher.register_table(db, "orders", ["ds", "region"], location=base)
    bad, lost, good = (f"job-{uuid.uuid4().hex[:8]}-{n}" for n in ("bad", "lost", "good"))
    with server.client("write") as c:
        # A partition path without the table's second key: cannot be valid.
        r = c.post("/v1/commits", json=manifest(base, ["ds=1"], jobId=bad))
        assert r.status_code == 422, r.text
        detail = r.json()["detail"]
        r = c.post("/v1/commits", json=manifest("file:/nowhere/x", ["ds=1/region=us"],
                                                 jobId=lost))
        assert (r.status_code, r.json()["status"]) == (200, "ignored"), r.text
        r = c.post("/v1/commits", json=manifest(base, ["ds=1/region=us"], jobId=good))
        assert r.status_code == 201, r.text
    rows = {row.split()[0]: row for row in _refused_rows(server)}
    assert "rejected" in rows[bad] and " ".join(detail.split()) in " ".join(rows[bad].split())
    assert "t-write" in rows[bad]  # who posted it
    assert "ignored" in rows[lost] and "no registered table matches file:/nowhere/x" in rows[lost]
    assert good not in rows  # applied commits are listed with the applied ones


def test_a_body_without_a_job_id_is_kept_too(server: Server) -> None:
    with server.client("write") as c:
        r = c.post("/v1/commits", json={"version": 1, "partitions": "no"})
        assert r.status_code == 422, r.text
    newest = _refused_rows(server)[0]
    assert newest.split()[:3] == ["(no", "job", "id)"] and "rejected" in newest


def test_refusals_are_capped_and_purged(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    app = build_app(store_url=store_url, transport_url="embedded://")
    try:
        refusals = CommitRefusals(app.store)
        monkeypatch.setattr(commit_refusals, "MAX_ROWS", 5)
        for i in range(8):
            refusals.record("rejected", f"job-{i}", "db.t", f"reason {i}", "spark")
        # The newest five stay, newest first; the three oldest went with the writes.
        assert [r.job_id for r in refusals.latest(100)] == [f"job-{i}" for i in range(7, 2, -1)]
        assert purge_all(app, 100, None).spark_commit_refusals == 0  # all younger than retention
        app.settings.spark_commit_retention_seconds = -1  # everything is now too old
        assert purge_all(app, 2, None).spark_commit_refusals == 5
        assert refusals.latest(100) == []
    finally:
        app.close()
