"""A zero deadline offset (``+0s``, ``+0h``, ``+0h0m0s``) was accepted by the CLI, the
JSON API and the /ui form alike: due the very moment the interval ends, when its data
can be complete at the earliest, so every instance is late unless marked done before
its own interval closed. Now all three refuse it naming the field, the value and the
accepted range (+1s to +744h); +1s is accepted; an expectation stored with a zero
offset before still loads. Real serve (SQLite, PostgreSQL), CLI in-process on SQLite.
"""

from __future__ import annotations

import hashlib
import hmac

import httpx
import pytest

from partition_notify import build_app
from partition_notify.cli import main
from partition_notify.cli.entry import EXIT_ERROR
from tests.http.support import Server
from tests.http.test_writes import assert_problem

ZEROS = ["+0s", "+0h", "+0m", "+0h0m0s", "+00h"]
RANGE = "an offset must be from +1s to +744h (31 days) after the interval end"
GOOD = {"name": "daily", "spec_template": "datestamp={{ ds_nodash }}", "cron": "0 0 * * *",
        "timezone": "UTC", "deadline": "+1s"}


@pytest.mark.parametrize("zero", ZEROS)
def test_the_json_api_refuses_a_zero_offset_naming_body_deadline(
        server: Server, zero: str) -> None:
    table = server.table()
    body = {"name": "daily", "specTemplate": GOOD["spec_template"], "cron": GOOD["cron"],
            "timezone": "UTC", "deadline": zero}
    with server.client("write") as c:
        assert_problem(c.post(f"/v1/tables/{table}/expectations", json=body), 422,
                       "body.deadline", f"deadline {zero!r}", RANGE)
        r = c.post(f"/v1/tables/{table}/expectations", json={**body, "deadline": "+1s"})
        assert r.status_code == 201, r.text
        assert r.json()["deadline"] == "+0h0m1s", r.json()


def test_the_ui_form_refuses_a_zero_offset_naming_form_deadline(server: Server) -> None:
    table = server.table()
    admin = server.tokens["admin"]
    csrf = hmac.new(admin.encode(), b"partition-notify /ui csrf", hashlib.sha256).hexdigest()
    with httpx.Client(base_url=server.base, cookies={"pn_ui_token": admin}, timeout=30) as c:
        r = c.post(f"/ui/tables/{table}/expectations",
                   data={**GOOD, "deadline": "+0s", "csrf": csrf})
        assert_problem(r, 422, "form.deadline", "deadline '+0s'", RANGE)
        assert c.post(f"/ui/tables/{table}/expectations",
                      data={**GOOD, "csrf": csrf}).status_code == 303


def test_the_cli_refuses_a_zero_offset_in_one_line_and_loads_an_old_one(
        capsys: pytest.CaptureFixture[str], sqlite_url: str) -> None:
    with build_app(store_url=sqlite_url) as app:
        info = app.publisher.register_table("db", "t", ["datestamp"])
        # Stored before zero was refused: it must still list (and be checked).
        app.deadlines.store.add(info, "old", GOOD["spec_template"], GOOD["cron"], "UTC",
                                {"deadline": "+0h0m0s"})
    capsys.readouterr()
    add = ["--store-url", sqlite_url, "expect", "add", "db.t", "--name", "daily",
           "--spec-template", GOOD["spec_template"], "--cron", GOOD["cron"], "--deadline"]
    assert main([*add, "+0s"]) == EXIT_ERROR
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith("partition-notify expect add: error: deadline '+0s': "), err
    assert RANGE in err, err
    assert main([*add, "+1s"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["--store-url", sqlite_url, "expect", "list", "db.t"]) == 0
    listed = capsys.readouterr().out
    assert '"name": "old"' in listed and '"deadline": "+0h0m0s"' in listed, listed
    assert '"name": "daily"' in listed and '"deadline": "+0h0m1s"' in listed, listed
