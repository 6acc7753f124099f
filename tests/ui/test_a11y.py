"""``/ui`` accessibility in a real headless Chromium (issue 19): keyboard only, contrast,
a word beside every colour, a phone-width viewport."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.http.support import Server
from tests.ui.test_browser import sign_in, wait_live

LABELS = {"late": "late", "recovered": "late, then done", "done": "done",
          "announced": "announced", "expected": "expected", "absent": "—"}

#: WCAG 2.x contrast of an element's text on its own background (both opaque here).
CONTRAST_JS = """
const lum = (css) => {
  const [r, g, b] = css.match(/\\d+(\\.\\d+)?/g).slice(0, 3).map(Number).map((v) => {
    v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
};
const s = getComputedStyle(arguments[0]);
const [a, b] = [lum(s.color), lum(s.backgroundColor)].sort((x, y) => y - x);
return (a + 0.05) / (b + 0.05);
"""


def _board(server: Server) -> str:
    table = server.table()
    db, name = table.split(".")
    server.app.publisher.announce_partitions(db, name, [
        {"datestamp": d, "region": r} for d in ("20261124", "20261125") for r in ("eu", "us")])
    server.app.publisher.send_mark_set_done(db, name, {"datestamp": "20261124"})
    return table


def _active(browser: Any) -> Any:
    return browser.switch_to.active_element


def _press(browser: Any, *keys: str) -> None:
    ActionChains(browser).send_keys(*keys).perform()


def test_the_board_works_with_the_keyboard_alone(server: Server, browser: Any) -> None:
    table = _board(server)
    sign_in(browser, server.base, server.tokens["read"], f"/ui/tables/{table}")
    wait_live(browser)
    _press(browser, Keys.TAB)
    assert _active(browser).text == "Skip to content"
    _press(browser, Keys.ENTER)
    assert _active(browser).get_attribute("id") == "main"
    for _ in range(20):  # the links before the board: Events, then the board
        _press(browser, Keys.TAB)
        if _active(browser).get_attribute("class").startswith("cell"):
            break
    first = _active(browser)
    assert first.get_attribute("data-spec") == "datestamp=20261125/region=eu"
    style = browser.execute_script(
        "const s = getComputedStyle(arguments[0]); return [s.outlineStyle, s.outlineWidth]", first)
    assert style == ["solid", "3px"]  # the focus is visible
    _press(browser, Keys.ARROW_RIGHT)
    assert _active(browser).get_attribute("data-spec") == "datestamp=20261125/region=us"
    _press(browser, Keys.ARROW_DOWN)
    assert _active(browser).get_attribute("data-spec") == "datestamp=20261124/region=us"
    _press(browser, Keys.ENTER)
    assert browser.find_element(By.ID, "details").is_displayed()
    assert browser.find_element(By.ID, "d-spec").text == "datestamp=20261124/region=us"
    assert browser.find_element(By.ID, "d-state").text == "done"
    # One Tab stop for the whole board: Tab leaves it, Shift+Tab comes back to the same cell.
    _press(browser, Keys.TAB)
    assert "cell" not in (_active(browser).get_attribute("class") or "")
    ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()
    assert _active(browser).get_attribute("data-spec") == "datestamp=20261124/region=us"


def test_every_state_has_its_word_and_readable_contrast(server: Server, browser: Any) -> None:
    table = _board(server)
    sign_in(browser, server.base, server.tokens["read"], f"/ui/tables/{table}")
    cells = browser.find_elements(By.CSS_SELECTOR, "#board button.cell")
    assert cells
    for c in cells:  # never colour alone
        assert c.text == LABELS[c.get_attribute("data-state")]
    for c in browser.find_elements(By.CSS_SELECTOR, ".legend .cell"):
        ratio = browser.execute_script(CONTRAST_JS, c)
        assert ratio >= 4.5, (c.text, ratio)  # WCAG AA for normal text
    link = browser.find_element(By.LINK_TEXT, "Events")
    assert browser.execute_script(CONTRAST_JS.replace(
        "s.backgroundColor", "getComputedStyle(document.body).backgroundColor"), link) >= 4.5


def test_pages_fit_a_phone_width(server: Server, browser: Any) -> None:
    table = _board(server)
    browser.set_window_size(375, 812)
    sign_in(browser, server.base, server.tokens["read"], f"/ui/tables/{table}")
    width = browser.execute_script("return window.innerWidth")
    assert width <= 400
    for path in (f"/ui/tables/{table}", f"/ui/tables?q={table.split('.')[0]}",
                 f"/ui/tables/{table}/events"):
        browser.get(server.base + path)
        # The page itself never scrolls sideways; wide tables scroll in their own box.
        assert browser.execute_script(
            "return document.documentElement.scrollWidth") <= width, path
        for el in browser.find_elements(By.CSS_SELECTOR, "header nav a, header .who button, h1"):
            right = browser.execute_script(
                "return arguments[0].getBoundingClientRect().right", el)
            assert right <= width, (path, el.text, right)
    browser.get(server.base + f"/ui/tables/{table}")
    board_box = browser.find_element(By.CSS_SELECTOR, ".scroll")
    assert browser.execute_script(
        "return getComputedStyle(arguments[0]).overflowX", board_box) == "auto"
    cell = browser.find_element(By.CSS_SELECTOR, "#board button.cell")
    browser.execute_script("arguments[0].scrollIntoView()", cell)
    cell.click()  # still usable by touch at this width
    assert browser.find_element(By.ID, "details").is_displayed()
