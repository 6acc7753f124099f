"""On call, with more tables than fit a page: the tables page says how many are late
and lists only those on request, whatever page their names fall on."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.by import By

from partition_notify.http.ui.pages import PAGE_SIZE
from tests.http.support import Server, unique_db
from tests.ui.test_browser import make_late, sign_in


def _listed(browser: Any) -> list[str]:
    return [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#tables tbody th a")]


def test_late_tables_are_counted_and_listed_alone(server: Server, browser: Any) -> None:
    db = unique_db()
    for n in range(PAGE_SIZE + 5):  # more than a page, each named before the late one
        server.app.publisher.register_table(db, f"a{n:03d}", ["ts"])
    make_late(server, db, "zz_late")

    sign_in(browser, server.base, server.tokens["read"], f"/ui/tables?q={db}")
    assert f"{db}.zz_late" not in _listed(browser)  # page 1 of 2: the late one is not here
    summary = browser.find_element(By.ID, "late-summary")
    assert "late" in summary.text
    summary.find_element(By.TAG_NAME, "a").click()

    listed = _listed(browser)
    assert f"{db}.zz_late" in listed
    assert not [t for t in listed if t.startswith(f"{db}.a")], listed
    assert "late" in browser.find_element(By.ID, "count").text
    # The filter survives the name filter and paging links (a bookmarkable view).
    assert "late=1" in browser.current_url
