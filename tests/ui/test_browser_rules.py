"""``/ui`` shows a table's completeness rules and marks derived set-dones (issue 21).

Real headless Chromium, a real ``serve`` whose rules job derives the set-done
(tests/ui/conftest.py); every test ends asserting no console errors.
"""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.http.support import Server
from tests.ui.test_browser import cell, sign_in, wait_live

#: The serve's rules job runs every 5 s (PN_RULES_INTERVAL_SECONDS default) on a busy machine.
DERIVE_SECONDS = 60


def test_rules_are_listed_and_derived_cells_and_events_name_their_rule(
        server: Server, browser: Any) -> None:
    table = server.table()
    db, name = table.split(".")
    server.app.rules.add(table, name="regions", kind="all-of",
                         params={"key": "region", "values": ["us", "eu"], "by": ["datestamp"]})
    server.app.publisher.announce_partitions(db, name, [{"datestamp": "20261125", "region": "us"}])
    sign_in(browser, server.base, server.tokens["read"], f"/ui/tables/{table}")
    wait_live(browser)
    (row,) = browser.find_elements(By.CSS_SELECTOR, '#rules tr[data-rule="regions"]')
    assert "all-of" in row.text and "values=us,eu" in row.text

    # The last input arrives; serve derives the set-done; the open board turns it done live.
    server.app.publisher.announce_partitions(db, name, [{"datestamp": "20261125", "region": "eu"}])
    us = "datestamp=20261125/region=us"
    WebDriverWait(browser, DERIVE_SECONDS, poll_frequency=0.1).until(
        lambda b: cell(b, us).get_attribute("data-state") == "done")
    assert cell(browser, us).get_attribute("data-rule") == "regions"
    cell(browser, us).click()
    assert browser.find_element(By.ID, "d-rule").text == "regions"

    browser.refresh()  # rendered by the server: marked derived from the rule's firing
    assert cell(browser, us).get_attribute("data-rule") == "regions"
    assert "derived by rule regions" in cell(browser, us).get_attribute("aria-label")
    browser.get(f"{server.base}/ui/tables/{table}/events?type=PARTITION_DONE")
    (derived,) = browser.find_elements(By.CSS_SELECTOR, "#events .derived")
    assert derived.text == "derived by rule regions"
