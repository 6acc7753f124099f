"""A real headless Chromium (Debian's ``chromium`` + ``chromium-driver``) against a real serve.

In CI a missing browser is a failure (``require``), never a skip;
``scripts/bootstrap.sh`` installs it.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.http.support import Server, start_server
from tests.support.ci import require


def _paths() -> tuple[str | None, str | None]:
    return shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="module", params=["sqlite"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    # The deadline checker runs often, so an every-minute expectation falls late in the test.
    yield from start_server(request, PN_DEADLINE_CHECK_INTERVAL_SECONDS="0.5",
                            PN_DEADLINE_LOOKBACK_SECONDS="150")


@pytest.fixture
def browser() -> Iterator[Any]:
    chromium, driver = _paths()
    require(chromium is not None and driver is not None,
            "chromium and chromedriver are not installed (scripts/bootstrap.sh installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(chromium)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    b = webdriver.Chrome(options=opts, service=Service(executable_path=str(driver)))
    b.set_page_load_timeout(30)
    b.set_script_timeout(30)
    try:
        yield b
        errors = [e for e in b.get_log("browser") if e.get("level") == "SEVERE"]
        assert not errors, f"console errors: {errors}"
    finally:
        b.quit()
