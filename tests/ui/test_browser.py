"""``/ui`` in a real headless Chromium against a real ``serve`` (issue 19).

Every test ends by asserting the browser logged no console errors (conftest).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from partition_notify.store.dead_letters import DeadLetters
from partition_notify.store.schema import EventRow
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from sqlalchemy import select

from partition_notify.app import App, build_app
from partition_notify.http.store import HttpStore
from tests.http.support import HttpServe, Server, make_late, unique_db
from tests.support.accounts import ROOT, bus_specs
from tests.support.ci import require
from tests.support.net import port_open

PUSH_SECONDS = 1.0


def sign_in(browser: Any, base: str, token: str, path: str = "/ui/tables") -> None:
    browser.get(base + path)
    WebDriverWait(browser, 10).until(lambda b: "/ui/sign-in" in b.current_url)
    field = browser.find_element(By.ID, "token")
    field.send_keys(token)
    field.submit()
    WebDriverWait(browser, 10).until(lambda b: "/ui/sign-in" not in b.current_url)


def cli(server: Server, *args: str) -> None:
    env = {**os.environ, "PN_STORE_URL": server.serve.store_url,
           "PN_TRANSPORT_URL": "embedded://", "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "partition_notify.cli", *args], env=env, cwd=ROOT,
                   check=True, capture_output=True, timeout=60)


def cell(browser: Any, spec: str) -> Any:
    return browser.find_element(By.CSS_SELECTOR, f'button.cell[data-spec="{spec}"]')


def wait_live(browser: Any) -> None:
    WebDriverWait(browser, 10).until(
        lambda b: b.find_element(By.ID, "board").get_attribute("data-live") == "1")


def test_sign_in_with_a_read_token_lists_tables(server: Server, browser: Any) -> None:
    table = server.table()
    sign_in(browser, server.base, server.tokens["read"], f"/ui/tables?q={table.split('.')[0]}")
    rows = browser.find_elements(By.CSS_SELECTOR, "#tables tbody th a")
    assert [r.text for r in rows] == [table]
    assert "t-read (read)" in browser.find_element(By.CSS_SELECTOR, ".who").text
    cookie = browser.get_cookie("pn_ui_token")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"


def test_a_wrong_token_is_refused_on_the_form(server: Server, browser: Any) -> None:
    browser.get(server.base + "/ui/sign-in")
    browser.find_element(By.ID, "token").send_keys("pn_not-a-token")
    browser.find_element(By.CSS_SELECTOR, "form.stack button").click()
    WebDriverWait(browser, 10).until(lambda b: b.find_elements(By.ID, "sign-in-error"))
    assert browser.get_cookie("pn_ui_token") is None
    # The 401 of the form post is logged by Chromium as a failed resource; expected here.
    browser.get_log("browser")


def test_mark_done_from_another_process_turns_cells_done_live(
    server: Server, browser: Any
) -> None:
    table = server.table()
    db, name = table.split(".")
    server.app.publisher.announce_partitions(db, name, [
        {"datestamp": "20261124", "region": "us"}, {"datestamp": "20261124", "region": "eu"},
        {"datestamp": "20261125", "region": "us"}])
    sign_in(browser, server.base, server.tokens["read"], f"/ui/tables/{table}")
    wait_live(browser)
    assert cell(browser, "datestamp=20261124/region=us").get_attribute("data-state") == "announced"
    page_id = browser.execute_script("return window.performance.timeOrigin")

    cli(server, "mark-done", table, "datestamp=20261124")
    done_ms = _commit_ms(server, table, "PARTITION_DONE")
    for spec in ("datestamp=20261124/region=us", "datestamp=20261124/region=eu"):
        WebDriverWait(browser, 5, poll_frequency=0.02).until(
            lambda b, s=spec: cell(b, s).get_attribute("data-state") == "done")
        changed = int(cell(browser, spec).get_attribute("data-changed-at"))
        assert changed - done_ms < PUSH_SECONDS * 1000, (spec, changed - done_ms)
        assert cell(browser, spec).text == "done"
    assert cell(browser, "datestamp=20261125/region=us").get_attribute("data-state") == "announced"
    # No reload happened: the same document.
    assert browser.execute_script("return window.performance.timeOrigin") == page_id


def test_new_rows_and_columns_appear_live_without_reload(server: Server, browser: Any) -> None:
    table = server.table()
    db, name = table.split(".")
    server.app.publisher.announce_partitions(db, name, [
        {"datestamp": "20261124", "region": "us"}, {"datestamp": "20261123", "region": "us"}])
    sign_in(browser, server.base, server.tokens["read"], f"/ui/tables/{table}")
    wait_live(browser)
    page_id = browser.execute_script("return window.performance.timeOrigin")
    assert not browser.find_elements(By.CSS_SELECTOR, 'button.cell[data-spec*="20261125"]')

    # From another process: a newer day (a new first row) and a new region (a new column).
    cli(server, "announce", table, "datestamp=20261125/region=us", "datestamp=20261124/region=ap")
    for spec in ("datestamp=20261125/region=us", "datestamp=20261124/region=ap"):
        WebDriverWait(browser, 5, poll_frequency=0.02).until(
            lambda b, s=spec: b.find_elements(By.CSS_SELECTOR, f'button.cell[data-spec="{s}"]'))
        c = cell(browser, spec)
        WebDriverWait(browser, 5, poll_frequency=0.02).until(
            lambda b, s=spec: cell(b, s).get_attribute("data-state") == "announced")
        changed = int(cell(browser, spec).get_attribute("data-changed-at"))
        assert changed - _added_ms(server, spec) < PUSH_SECONDS * 1000, spec
        assert c.text == "announced"
    # In the order the server renders: newest day first, columns sorted.
    rows = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#board tbody th")]
    assert rows == ["20261125", "20261124", "20261123"]
    heads = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "#board thead th")][1:]
    assert heads == ["region=ap", "region=us"]
    # The cells the new row and column brought along exist, empty.
    assert cell(browser, "datestamp=20261125/region=ap").get_attribute("data-state") == "absent"
    assert cell(browser, "datestamp=20261123/region=ap").text == "—"
    # A new cell works like the rendered ones: its details, then a set-done on its row.
    cell(browser, "datestamp=20261125/region=us").click()
    assert browser.find_element(By.ID, "d-spec").text == "datestamp=20261125/region=us"
    cli(server, "mark-done", table, "datestamp=20261125")
    WebDriverWait(browser, 5, poll_frequency=0.02).until(
        lambda b: cell(b, "datestamp=20261125/region=ap").get_attribute("data-state") == "done")
    assert browser.execute_script("return window.performance.timeOrigin") == page_id
    assert not browser.find_element(By.ID, "new-rows").is_displayed()
    # A reload renders the same board.
    live = {c.get_attribute("data-spec"): c.get_attribute("data-state")
            for c in browser.find_elements(By.CSS_SELECTOR, "button.cell")}
    browser.refresh()
    rendered = {c.get_attribute("data-spec"): c.get_attribute("data-state")
                for c in browser.find_elements(By.CSS_SELECTOR, "button.cell")}
    assert rendered == live


def _added_ms(server: Server, spec: str) -> int:
    """timestampMs of the ADD_PARTITION that carried ``spec``."""
    import json

    with server.app.store.engine.connect() as conn:
        bodies = conn.execute(select(EventRow.body).where(EventRow.event_type == "ADD_PARTITION")
                              .order_by(EventRow.event_id.desc()).limit(50)).scalars().all()
    for body in bodies:
        msg = json.loads(body)
        if any("/".join(f"{k}={v}" for k, v in sorted(p.items())) == spec
               for p in msg["partitions"]):
            return int(msg["timestampMs"])
    raise AssertionError(f"no ADD_PARTITION carried {spec}")


def _commit_ms(server: Server, table: str, event_type: str) -> int:
    import json

    with server.app.store.engine.connect() as conn:
        body = conn.execute(
            select(EventRow.body).where(EventRow.event_type == event_type)
            .order_by(EventRow.event_id.desc()).limit(1)).scalar_one()
    msg = json.loads(body)
    assert f"{msg['db']}.{msg['table']}" == table
    return int(msg["timestampMs"])


def test_a_late_expectation_shows_late_then_recovered(server: Server, browser: Any) -> None:
    db = unique_db()
    spec = make_late(server, db, "ticks")
    sign_in(browser, server.base, server.tokens["read"], f"/ui/tables/{db}.ticks")
    wait_live(browser)
    assert cell(browser, spec).get_attribute("data-state") == "late"
    assert cell(browser, spec).text == "late"
    cli(server, "mark-done", f"{db}.ticks", spec)
    WebDriverWait(browser, 5, poll_frequency=0.02).until(
        lambda b: cell(b, spec).get_attribute("data-state") == "recovered")
    assert cell(browser, spec).text == "late, then done"
    browser.refresh()  # the server renders the same verdict
    assert cell(browser, spec).get_attribute("data-state") == "recovered"


def test_read_token_cannot_see_or_use_admin_actions(server: Server, browser: Any) -> None:
    table = server.table()
    sign_in(browser, server.base, server.tokens["read"], f"/ui/tables/{table}")
    assert not browser.find_elements(By.LINK_TEXT, "Operations")
    assert not browser.find_elements(By.ID, "add-expectation")
    read, admin = server.tokens["read"], server.tokens["admin"]

    def post(token: str, path: str, csrf: str | None, origin: str | None = None
             ) -> httpx.Response:
        headers = {"Origin": origin} if origin else {}
        data = {"action": "discard", "event_id": "1", "name": "x", "spec_template": "datestamp=1",
                "cron": "0 0 * * *", "deadline": "+1h", **({"csrf": csrf} if csrf else {})}
        return httpx.post(server.base + path, data=data, cookies={"pn_ui_token": token},
                          headers=headers, timeout=30, follow_redirects=False)

    good_read = _csrf(read)
    for path in ("/ui/ops/dead-letters", f"/ui/tables/{table}/expectations"):
        assert post(read, path, good_read).status_code == 403  # even with its own CSRF token
        assert post(admin, path, None).status_code == 403  # forged: no CSRF token
        assert post(admin, path, _csrf(read)).status_code == 403  # someone else's
        assert post(admin, path, _csrf(admin), "https://evil.example").status_code == 403
    r = httpx.get(server.base + "/ui/ops", cookies={"pn_ui_token": read}, timeout=30)
    assert r.status_code == 403 and r.headers["content-type"] == "application/problem+json"
    assert server.app.deadlines.expectations(*table.split(".")) == []


def _csrf(token: str) -> str:
    # The server's derivation (partition_notify/http/ui/session.py), computed independently.
    return hmac.new(token.encode(), b"partition-notify /ui csrf", hashlib.sha256).hexdigest()


def test_admin_redrives_a_dead_letter_and_the_relay_delivers_it(browser: Any) -> None:
    bus = bus_specs()["activemq"]
    host, _, port = bus.url.removeprefix("stomp://").partition(":")
    require(port_open(host, int(port)), f"ActiveMQ STOMP at {bus.url} is not reachable")
    tmp = Path(tempfile.mkdtemp(prefix="pn-ui-"))
    url = f"sqlite:///{tmp}/store.db"
    app = build_app(store_url=url, transport_url="embedded://")
    serve: HttpServe | None = None
    db = unique_db()
    try:
        app.publisher.register_table(db, "refused", ["ds"])
        info = app.store.catalog.get_table(db, "refused")
        draft = app.publisher._partition_draft(info, {"ds": "1"}, None, None)
        event_id = app.store.log.append([draft])[0].event_id  # logged, not yet sent
        # The broker refused it for good: a dead letter the relay no longer sends.
        DeadLetters(app.store).record_rejections({event_id: "refused: test"}, max_attempts=1,
                                                 backoff=lambda n: 1.0)
        token = HttpStore(app.store).create_token("ops-admin", "admin")[1]
        serve = HttpServe(url, tmp / "serve.log", env_extra={
            "PN_TRANSPORT_URL": bus.url, "PN_BROKER_USERNAME": bus.username or "",
            "PN_BROKER_PASSWORD": bus.password or ""}).start()
        sign_in(browser, serve.base, token, "/ui/ops")
        row = browser.find_element(By.ID, f"dl-{event_id}")
        assert "refused: test" in row.text
        assert not published(app, event_id)
        row.find_element(By.XPATH, f'.//button[text()="Redrive {event_id}"]').click()
        WebDriverWait(browser, 10).until(lambda b: b.find_elements(By.ID, "done"))
        assert f"redrive {event_id}" in browser.find_element(By.ID, "done").text
        deadline = time.monotonic() + 30
        while not published(app, event_id):
            assert time.monotonic() < deadline, "the relay did not deliver the redriven event"
            time.sleep(0.1)  # serve's relay is another process: nothing to await here
        browser.refresh()
        assert not browser.find_elements(By.ID, f"dl-{event_id}")
    finally:
        code = serve.stop() if serve is not None else 0
        app.close()
    assert code == 0


def published(app: App, event_id: int) -> bool:
    """The broker confirmed it (the relay's durable publish) and it is no dead letter."""
    with app.store.engine.connect() as conn:
        row = conn.execute(select(EventRow.published_at, EventRow.dead_at)
                           .where(EventRow.event_id == event_id)).one()
    return row.published_at is not None and row.dead_at is None
