"""``/ui`` server-side render time with 10,000 tables and 10,000 partitions.

    PYTHONPATH=. python bench/ui_render.py [--tables 10000] [--partitions 10000]
        [--requests 50] [--backend sqlite|postgresql]

A real ``partition-notify serve`` (PN_HTTP_BIND) on a store holding
``--tables`` registered tables, one of which has ``--partitions`` partitions
(100 values of ``datestamp`` x N/100 regions) and a set-done per day. Timed,
sequentially from this process, ``--requests`` times each: the tables
overview (page 1 and a name filter), the board of the big table, its events
page; beside them the baseline, the JSON API's ``GET /v1/tables`` (every
table). Reported: p50 and p95 in ms of the full HTTP round trip (server
render plus a loopback hop). Goal (issue 19): p95 < 300 ms.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx
from core_common import machine_note, pct, scratch_store_url
from http_clients import start_serve

from partition_notify.app import build_app
from partition_notify.http.store import HttpStore
from tests.support.net import free_port

BIG = ("bench", "big")


def seed(url: str, tables: int, partitions: int) -> str:
    app = build_app(store_url=url, transport_url="embedded://")
    try:
        pub = app.publisher
        pub.register_table(*BIG, ["datestamp", "region"])
        for i in range(tables - 1):
            pub.register_table(f"db{i % 100:03d}", f"t{i:05d}", ["ds"])
        regions = max(1, partitions // 100)
        for d in range(100):
            day = f"2026{1 + d // 28:02d}{1 + d % 28:02d}"
            pub.announce_partitions(*BIG, [{"datestamp": day, "region": f"r{r:03d}"}
                                           for r in range(regions)])
            if d % 2 == 0:
                pub.send_mark_set_done(*BIG, {"datestamp": day})
        return HttpStore(app.store).create_token("bench", "read")[1]
    finally:
        app.close()


def timed(client: httpx.Client, path: str, n: int) -> tuple[float, float]:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = client.get(path)
        samples.append((time.perf_counter() - t0) * 1000)
        if r.status_code != 200:
            raise SystemExit(f"{path}: {r.status_code} {r.text[:300]}")
    return pct(samples, 50), pct(samples, 95)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    args = ap.parse_args()
    with scratch_store_url(args.backend) as url:
        t0 = time.monotonic()
        token = seed(url, args.tables, args.partitions)
        print(f"seeded {args.tables} tables, {args.partitions} partitions in "
              f"{time.monotonic() - t0:.0f} s ({args.backend})", file=sys.stderr)
        port = free_port()
        proc = start_serve(url, port, Path(tempfile.mkdtemp()) / "serve.log")
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30,
                              cookies={"pn_ui_token": token},
                              headers={"Authorization": f"Bearer {token}"}) as c:
                print(f"# ui_render: {machine_note()}; {args.requests} requests each, ms")
                print(f"{'page':<44} {'p50':>8} {'p95':>8}")
                for path in ("/v1/tables  (baseline: JSON, every table)", "/ui/tables",
                             "/ui/tables?q=db042&page=2", "/ui/tables/bench.big",
                             "/ui/tables/bench.big/events"):
                    p50, p95 = timed(c, path.split()[0], args.requests)
                    print(f"{path:<44} {p50:8.1f} {p95:8.1f}")
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
