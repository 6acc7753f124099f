"""On call, with more tables than fit a page: the tables page says how many are late
and lists only those on request, whatever page their names fall on."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from selenium.webdriver.common.by import By

from partition_notify.http.ui.pages import PAGE_SIZE
from partition_notify.http.ui.render import when
from tests.http.support import Server, make_late, unique_db
from tests.ui.test_browser import sign_in


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


def test_a_boards_expectations_say_what_is_late_and_what_is_due_next(server: Server,
                                                                     browser: Any) -> None:
    db = unique_db()
    spec = make_late(server, db, "ticks")
    sign_in(browser, server.base, server.tokens["read"], f"/ui/tables/{db}.ticks")
    row = browser.find_element(By.CSS_SELECTOR, "#expectations tbody tr")
    headers = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "#expectations thead th")]
    cells = dict(zip(headers[1:], [c.text for c in row.find_elements(By.TAG_NAME, "td")],
                     strict=False))
    assert spec in cells["Late now"]
    view = server.app.deadlines.expectations(db, "ticks")[0]
    assert view.next_spec is not None and view.next_spec in cells["Next due"]
    shown = when(datetime.fromisoformat(str(view.next_deadline)).timestamp())
    assert shown in cells["Next due"]  # the page's one time format, in UTC
