"""Make docs/ui-board.png: the partition board of a real ``serve`` in headless Chromium.

    .venv/bin/python scripts/ui_screenshot.py [--out docs/ui-board.png]

Seeds a scratch SQLite store (a week of ``sales.orders`` partitions, some
days done, a daily expectation the deadline checker declares late, one late
day then done), starts ``partition-notify serve`` with HTTP on, signs in with
an admin token and screenshots the board with one cell's details open.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from sqlalchemy import text

from partition_notify.app import App, build_app
from partition_notify.http.store import HttpStore

ROOT = Path(__file__).resolve().parents[1]
REGIONS = ("apac", "eu", "latam", "us")


def day(n: int) -> str:
    return (datetime.now(UTC) - timedelta(days=n)).strftime("%Y%m%d")


def seed(app: App) -> str:
    pub = app.publisher
    pub.register_table("sales", "orders", ["datestamp", "region"])
    for n in range(7, -1, -1):
        regions = REGIONS[:2] if n == 0 else REGIONS
        pub.announce_partitions("sales", "orders", [{"datestamp": day(n), "region": r}
                                                    for r in regions])
        if n >= 3:
            pub.send_mark_set_done("sales", "orders", {"datestamp": day(n)})
    pub.send_mark_set_done("sales", "orders", {"datestamp": day(1), "region": "eu"})
    app.deadlines.add("sales", "orders", name="daily", spec_template="datestamp={{ ds_nodash }}",
                      cron="0 0 * * *", deadline="+0s")
    # A new expectation judges only later deadlines: backdated, the past days are judged.
    with app.store.engine.begin() as conn:
        conn.execute(text("UPDATE pn_expectations SET created_at = 0"))
    return HttpStore(app.store).create_token("on-call", "admin")[1]


def serve(url: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PN_STORE_URL": url,
           "PN_TRANSPORT_URL": "embedded://", "PN_HTTP_BIND": f"127.0.0.1:{port}",
           "PN_DEADLINE_CHECK_INTERVAL_SECONDS": "0.5",
           "PN_DEADLINE_LOOKBACK_SECONDS": str(3 * 86400)}
    return subprocess.Popen([sys.executable, "-m", "partition_notify.cli", "serve"], cwd=ROOT,
                            env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def wait(what: str, ok: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ok():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "docs" / "ui-board.png"))
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pn-shot-"))
    url = f"sqlite:///{tmp}/store.db"
    app = build_app(store_url=url, transport_url="embedded://")
    token = seed(app)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = serve(url, port, tmp / "serve.log")
    base = f"http://127.0.0.1:{port}"
    try:
        def ready() -> bool:
            try:
                return httpx.get(base + "/readyz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait("serve", ready)
        wait("the checker's late verdicts",
             lambda: len(app.deadlines.open_late("sales", "orders")) >= 2)
        app.publisher.send_mark_set_done("sales", "orders", {"datestamp": day(2)})
        shoot(base, token, args.out)
    finally:
        proc.terminate()
        proc.wait(30)
        app.close()
    print(args.out)


def shoot(base: str, token: str, out: str) -> None:
    import shutil

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1100,900", "--hide-scrollbars"):
        opts.add_argument(arg)
    # Debian's browser and driver: no Selenium Manager download.
    b = webdriver.Chrome(options=opts, service=Service(shutil.which("chromedriver")))
    try:
        b.get(base + "/ui/sign-in?next=/ui/tables/sales.orders")
        b.find_element(By.ID, "token").send_keys(token)
        b.find_element(By.ID, "token").submit()
        WebDriverWait(b, 10).until(
            lambda d: d.find_element(By.ID, "board").get_attribute("data-live") == "1")
        b.find_element(By.CSS_SELECTOR, "button.cell.recovered").click()
        b.save_screenshot(out)
    finally:
        b.quit()


if __name__ == "__main__":
    main()
