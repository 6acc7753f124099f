"""Withdrawn cells on the ``/ui`` board, in a real headless Chromium against a real ``serve``.

The state is written beside the colour (the cell's text and aria-label say
"withdrawn"), on a fresh render and live from the stream; a re-announce turns
the cell back to announced.
"""

from __future__ import annotations

from typing import Any

from selenium.webdriver.support.ui import WebDriverWait

from tests.http.support import Server
from tests.ui.test_browser import cell, cli, sign_in, wait_live

WITHDRAWN = "datestamp=20261124/region=us"


def test_a_withdrawal_shows_withdrawn_cells_live_and_on_render(
        server: Server, browser: Any) -> None:
    table = server.table()
    db, name = table.split(".")
    server.app.publisher.announce_partitions(db, name, [
        {"datestamp": "20261124", "region": "us"}, {"datestamp": "20261124", "region": "eu"}])
    server.app.publisher.send_mark_set_done(db, name, "datestamp=20261124")
    sign_in(browser, server.base, server.tokens["read"], f"/ui/tables/{table}")
    wait_live(browser)
    assert cell(browser, WITHDRAWN).get_attribute("data-state") == "done"

    cli(server, "withdraw", table, WITHDRAWN, "--reason", "bad rows")
    WebDriverWait(browser, 5, poll_frequency=0.02).until(
        lambda b: cell(b, WITHDRAWN).get_attribute("data-state") == "withdrawn")
    assert cell(browser, WITHDRAWN).text == "withdrawn"
    assert cell(browser, WITHDRAWN).get_attribute("aria-label") == f"{WITHDRAWN}: withdrawn"

    browser.refresh()  # the server's render agrees: the set-done no longer covers eu either
    wait_live(browser)
    assert cell(browser, WITHDRAWN).get_attribute("data-state") == "withdrawn"
    assert cell(browser, WITHDRAWN).text == "withdrawn"
    assert cell(browser, "datestamp=20261124/region=eu").get_attribute("data-state") == "announced"

    cli(server, "announce", table, WITHDRAWN)  # restated
    WebDriverWait(browser, 5, poll_frequency=0.02).until(
        lambda b: cell(b, WITHDRAWN).get_attribute("data-state") == "announced")
