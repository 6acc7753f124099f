"""``/ui/ops`` in a real headless Chromium against a real ``serve`` (issue 19).

Spark manifests set aside by the pick-up (ignored, rejected) with their
reasons, and the Airflow push sink's dead letters redriven and discarded by
an admin. The signature is computed here from the documented format
(docs/security.md), not with the code under test.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import tempfile
from pathlib import Path
from typing import Any

import httpx
from partition_notify.store.damaged_rows import find_damaged
from partition_notify.store.dead_letters import DeadLetters
from partition_notify.store.push_letters import PushLetters
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait
from sqlalchemy import text

from partition_notify.app import build_app
from partition_notify.http.store import HttpStore
from tests.http.support import HttpServe, unique_db
from tests.ui.test_browser import sign_in

SINK = "airflow-push:http://airflow.example:8080#x"


def signed(doc: dict[str, Any], token: str) -> bytes:
    body = json.dumps(doc, separators=(",", ":")).encode()
    key = hashlib.sha256(token.encode()).hexdigest().encode()
    mac = hmac.new(key, body, hashlib.sha256).hexdigest()
    return body[:-1] + f',"signature":"hmac-sha256:{mac}"}}'.encode()


def test_admin_sees_set_aside_commits_and_acts_on_push_letters(browser: Any) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="pn-ui-ops-"))
    url = f"sqlite:///{tmp}/store.db"
    app = build_app(store_url=url, transport_url="embedded://")

    def letter(event_id: int) -> Any:
        return next(x for x in PushLetters(app.store).find() if x.event_id == event_id)

    serve: HttpServe | None = None
    db = unique_db()
    try:
        app.publisher.register_table(db, "orders", ["ds"], location=f"file:{tmp}/orders")
        writer = HttpStore(app.store).create_token("spark", "write")[1]
        admin = HttpStore(app.store).create_token("ops-admin", "admin")[1]
        # A manifest no table matches, kept by the pick-up of an extra spool directory...
        extra = tmp / "extra"
        extra.mkdir()
        (extra / "job-lost.json.ignored").write_bytes(signed({
            "version": 1, "jobId": "job-lost", "table": None,
            "outputPath": f"file:{tmp}/nowhere", "overwrite": False,
            "partitions": [{"path": "ds=1", "location": f"file:{tmp}/nowhere/ds=1"}]}, writer))
        # ...and one that cannot be valid (no signature) in the table's own spool.
        spool = tmp / "orders" / "_partition_notify"
        spool.mkdir(parents=True)
        (spool / "job-bad.json.rejected").write_text('{"version": 1, "jobId": "job-bad"}')
        PushLetters(app.store).record(SINK, 41, f"{db}.orders", "HTTP 400: unknown asset")
        PushLetters(app.store).record(SINK, 42, f"{db}.orders", "HTTP 422: bad partition key")
        serve = HttpServe(url, tmp / "serve.log",
                          env_extra={"PN_SPARK_SPOOL_DIRS": str(extra)}).start()
        # A manifest POST /v1/commits rejects: its reason is kept for the page.
        r = httpx.post(serve.base + "/v1/commits", timeout=30,
                       headers={"Authorization": f"Bearer {writer}"},
                       json={"version": 1, "jobId": "job-http", "partitions": "none"})
        assert r.status_code == 422, r.text
        sign_in(browser, serve.base, admin, "/ui/ops")
        refused = browser.find_element(By.ID, "refused").text
        assert "job-http" in refused and "rejected" in refused and "spark" in refused
        assert r.json()["detail"][:60] in refused  # the reason the job was given

        rows = {r.find_element(By.TAG_NAME, "th").text: r.text
                for r in browser.find_elements(By.CSS_SELECTOR, "#set-aside tbody tr")}
        assert "ignored" in rows["job-lost"] and f"file:{tmp}/nowhere" in rows["job-lost"]
        assert "--retry-ignored" in rows["job-lost"]
        assert "rejected" in rows["job-bad"] and "no valid signature" in rows["job-bad"]
        assert f"{db}.orders" in rows["job-bad"]  # whose spool held it
        assert "rejected" in browser.find_element(By.ID, "commit-counts").text

        assert "HTTP 422: bad partition key" in browser.find_element(By.ID, "pl-42").text
        _click(browser, "pl-42", "Redrive push 42")
        assert "push redrive 42" in browser.find_element(By.ID, "done").text
        assert letter(42).redriven and not letter(42).discarded
        assert "redriven" in browser.find_element(By.ID, "pl-42").text
        assert not letter(41).redriven  # only the one asked for
        _click(browser, "pl-41", "Discard push 41")
        assert letter(41).discarded and not letter(41).redriven
        row = browser.find_element(By.ID, "pl-41")
        assert "discarded" in row.text and not row.find_elements(By.TAG_NAME, "button")
    finally:
        code = serve.stop() if serve is not None else 0
        app.close()
    assert code == 0


def _click(browser: Any, row_id: str, label: str) -> None:
    row = browser.find_element(By.ID, row_id)
    row.find_element(By.XPATH, f'.//button[text()="{label}"]').click()
    # The answer is a new page: wait for the old one to go. A "done" already on it (the
    # previous action's) is not this action's (CI failure, 2026-11-28: the discard was
    # asserted before serve had it).
    # Mid-navigation chromedriver may answer "Node with given id does not belong to the
    # document" (a WebDriverException, not a stale reference): the old page is going too,
    # so look again (failed once so in a loaded full tests/ui run, 2026-11-29).
    WebDriverWait(browser, 10, ignored_exceptions=(WebDriverException,)).until(
        EC.staleness_of(row))
    WebDriverWait(browser, 10).until(lambda b: b.find_elements(By.ID, "done"))


def test_admin_sees_damaged_rows_of_the_event_log(browser: Any) -> None:
    """A row whose headers are damaged (rebuilt by the readers) and one whose body is
    damaged too (unverifiable, dead-lettered): both listed, the damaged text escaped."""
    tmp = Path(tempfile.mkdtemp(prefix="pn-ui-ops-"))
    url = f"sqlite:///{tmp}/store.db"
    app = build_app(store_url=url, transport_url="embedded://")
    serve: HttpServe | None = None
    db = unique_db()
    try:
        app.publisher.register_table(db, "orders", ["ds"])
        ids = [app.publisher.announce_partitions(db, "orders", [f"ds={p}"])[0].event_id
               for p in ("1", "2", "3")]
        with app.store.engine.begin() as conn:  # a broken tool's edits
            conn.execute(text("UPDATE pn_events SET headers = :h WHERE event_id = :e"),
                         {"h": json.dumps('<b id="injected">x</b>'), "e": ids[0]})
            conn.execute(text("UPDATE pn_events SET headers = '[1]', body = 'garbage', "
                              "published_at = NULL WHERE event_id = :e"), {"e": ids[1]})
        why = find_damaged(app.store, 10).rows[0].unverifiable
        DeadLetters(app.store).record_rejections({ids[1]: why}, max_attempts=1,
                                                 backoff=lambda n: 1.0)  # as the relay does
        admin = HttpStore(app.store).create_token("ops-admin", "admin")[1]
        serve = HttpServe(url, tmp / "serve.log").start()
        sign_in(browser, serve.base, admin, "/ui/ops")
        rebuilt = browser.find_element(By.ID, f"dr-{ids[0]}").text
        assert f"{db}.orders" in rebuilt and "headers rebuilt from the body" in rebuilt
        assert "is a JSON str, expected a JSON object" in rebuilt
        assert "<b id=" in rebuilt and "</b>" in rebuilt, rebuilt  # shown as text...
        assert not browser.find_elements(By.ID, "injected")  # ...never as markup
        bad = browser.find_element(By.ID, f"dr-{ids[1]}").text
        assert "unverifiable: never sent; dead-lettered" in bad, bad
        assert "'body' does not decode" in bad
        assert "'body' does not decode" in browser.find_element(By.ID, f"dl-{ids[1]}").text
        assert not browser.find_elements(By.ID, f"dr-{ids[2]}")
        scope = browser.find_element(By.ID, "damaged-scope").text
        assert f"ids 1..{ids[2]}" in scope and "at most 200 shown" in scope, scope
    finally:
        code = serve.stop() if serve is not None else 0
        app.close()
    assert code == 0
