"""Drive one in-process ``serve`` through simulated days (shared by the soak test and
``bench/year_soak.py``).

Each simulated day: announces and set-dones (Python), a set-done and a Spark
commit over HTTP (``POST /v1/tables/…/set-done``, ``POST /v1/commits``, each
with an Idempotency-Key), an expectation checked, a rejected spool manifest
and an abandoned partial write; then every job ``serve`` registers runs once,
as its scheduler would. The store's clock is injected (``build_app(clock=)``),
so a year takes minutes. Returns row counts and the process's RSS per sample.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from partition_notify.app import App, build_app
from partition_notify.http.store import HttpStore
from partition_notify.metrics import Metrics
from partition_notify.serve.housekeeping import COUNTED_TABLES
from partition_notify.serve.service import Service
from tests.support.clock import FakeClock

DAY = 86400.0
T0 = 1_800_000_000.0  # 2027-01-15


@dataclass(frozen=True)
class Sample:
    day: int
    rows: dict[str, int]
    rss_mb: float
    spool_files: int


def rss_mb() -> float:
    """Resident set size now (Linux /proc), in MB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 1e6


def _jobs(app: App) -> Service:
    svc = Service(app, metrics=Metrics())
    svc.scheduler.start = lambda *a, **k: None
    svc.start()
    return svc


def _day(app: App, client: httpx.Client, spool: Path, day: int, per_day: int) -> None:
    pub = app.publisher
    for t in range(3):
        specs = [f"ds={day}/h={h}" for h in range(per_day)]
        pub.announce_partitions("soak", f"t{t}", specs)
        pub.send_mark_set_done("soak", f"t{t}", f"ds={day}")
    r = client.post("/v1/tables/soak.t0/set-done", json={"spec": f"ds={day}/h=x"},
                    headers={"Idempotency-Key": f"done-{day}"})
    assert r.status_code in (201, 202), r.text
    out = f"file:{spool.parent}"
    manifest = {"version": 1, "jobId": f"job-{day}", "outputPath": out,
                "partitions": [{"path": f"ds={day}/h=s", "location": f"{out}/ds={day}/h=s"}],
                "markSetDone": f"ds={day}/h=s"}
    r = client.post("/v1/commits", json=manifest, headers={"Idempotency-Key": f"job-{day}"})
    assert r.status_code in (200, 201, 202), r.text
    for name in (f"job-r{day}.json.rejected", f".job-p{day}.json.tmp"):
        path = spool / name
        path.write_text("{}")
        when = app.store.clock()
        os.utime(path, (when, when))


def simulate(store_url: str, spool_root: Path, days: int, *, per_day: int = 4,
             sample_every: int = 30, **settings: Any) -> list[Sample]:
    """``settings`` override the defaults (e.g. shorter retentions for a short run)."""
    clock = FakeClock(T0)
    app = build_app(store_url=store_url, transport_url="embedded://", clock=clock,
                    http_bind="127.0.0.1:0", deadline_lookback_seconds=int(2 * DAY),
                    **settings)
    from partition_notify.http.server import HttpServer

    svc = _jobs(app)
    http = HttpServer(app, metrics=svc.metrics, healthy=lambda: True)
    samples: list[Sample] = []
    try:
        spool = spool_root / "t2" / "_partition_notify"
        spool.mkdir(parents=True)
        for t in range(3):
            app.publisher.register_table("soak", f"t{t}", ["ds", "h"],
                                         retention_seconds=int(7 * DAY),
                                         location=str(spool_root / f"t{t}"))
        app.deadlines.add("soak", "t1", name="daily", spec_template="ds={{ ds }}",
                          cron="0 0 * * *", deadline="06:00")
        checker = app.deadlines.checker(clock=clock)
        _, token = HttpStore(app.store).create_token("soak", "write")
        port = http.start()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}/v1".removesuffix("/v1"),
                          headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            for day in range(days):
                _day(app, client, spool, day, per_day)
                checker.check()
                clock.advance(DAY)
                for job in svc.scheduler.get_jobs():
                    job.func(*job.args, **job.kwargs)
                if (day + 1) % sample_every == 0:
                    rows = app.store.housekeeping.row_counts(COUNTED_TABLES)
                    samples.append(Sample(day + 1, rows, rss_mb(),
                                          sum(1 for _ in spool.iterdir())))
    finally:
        http.stop()
        app.close()
    return samples


def table(samples: list[Sample]) -> str:
    """Markdown: one row per sample, one column per counted table, RSS."""
    head = ["day", *COUNTED_TABLES, "spool files", "RSS MB"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in samples:
        cells = [str(s.day), *(f"{s.rows[t]:,}" for t in COUNTED_TABLES),
                 str(s.spool_files), f"{s.rss_mb:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    """``python -m tests.support.soak_year URL SPOOL DAYS SAMPLE_EVERY SETTINGS_JSON``:
    the run in a process of its own (its RSS is serve's alone); samples as JSON."""
    import json
    import sys

    url, spool, days, every, settings = argv
    samples = simulate(url, Path(spool), int(days), sample_every=int(every),
                       **json.loads(settings))
    sys.stdout.write(json.dumps([s.__dict__ for s in samples]) + "\n")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
