"""The /ui admin forms name the form field a refusal is about, as the JSON API names
``body.<field>``: ``form.spec_template``, ``form.cron``, ``form.version``, never just
"form" or a bare name."""

from __future__ import annotations

import hashlib
import hmac

import httpx
import pytest

from tests.http.support import Server
from tests.http.test_writes import assert_problem

GOOD = {"name": "daily", "spec_template": "datestamp={{ ds_nodash }}", "cron": "0 0 * * *",
        "timezone": "UTC", "deadline": "06:00"}


@pytest.mark.parametrize(("field", "value", "status"), [
    ("name", "Bad Name", 422), ("spec_template", "dstamp={{ ds_nodash }}", 422),
    ("cron", "0 0 * *", 422), ("timezone", "Europe/Berln", 422), ("deadline", "6h", 422),
])
def test_an_expectation_form_refusal_names_its_field(
        server: Server, field: str, value: str, status: int) -> None:
    table = server.table()
    admin = server.tokens["admin"]
    csrf = hmac.new(admin.encode(), b"partition-notify /ui csrf", hashlib.sha256).hexdigest()
    with httpx.Client(base_url=server.base, cookies={"pn_ui_token": admin}, timeout=30) as c:
        r = c.post(f"/ui/tables/{table}/expectations",
                   data={**GOOD, field: value, "csrf": csrf})
        assert_problem(r, status, f"form.{field}", value)
        assert c.post(f"/ui/tables/{table}/expectations",
                      data={**GOOD, "csrf": csrf}).status_code == 303
        assert_problem(c.post(f"/ui/tables/{table}/expectations",
                              data={**GOOD, "csrf": csrf}), 409, "form.name", "daily")
        assert_problem(c.post("/ui/ops/dead-letters",
                              data={"csrf": csrf, "action": "redrive", "event_id": "x"}),
                       422, "form.event_id")
        assert_problem(c.post("/ui/ops/dead-letters",
                              data={"csrf": csrf, "action": "x", "event_id": "1"}),
                       422, "form.action")
        assert_problem(c.post("/ui/ops/dead-letters",
                              data={"csrf": "x", "action": "redrive", "event_id": "1"}),
                       403, "form.csrf")
