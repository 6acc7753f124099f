"""Iceberg/Delta followers in a real ``serve``: commit -> add-partition latency, and the
follower's CPU/RSS with many followed tables.

    PYTHONPATH=. python bench/lakehouse_follow.py [--format iceberg|delta|both]
        [--latency-commits 20] [--short-interval 0.2]
        [--idle 1000] [--busy 100] [--commit-every 1.0] [--seconds 60]
        [--part latency|load|both] [--baseline /work/main] [--rounds 1]

latency   one table; ``serve`` (its own process, SQLite store, embedded transport)
          polls at the default interval (the settings' default) and at
          --short-interval. After each commit returns, the bench polls the store
          every 10 ms for the add-partition; the next commit waits a random
          fraction of the interval, so commits land at every phase of the poll.
load      --idle tables that never commit and --busy tables a writer process
          appends to every --commit-every s; ``serve`` polls at the default
          interval. Its CPU (utime+stime from /proc, a share of one core) and RSS
          are sampled over three windows of --seconds/3; medians are printed, with
          the commits written and announced per second (announced < written: the
          follower does not keep up). --baseline TREE runs TREE's serve on the
          same tables beside ours, --rounds alternating rounds (medians).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core_common import machine_note, summary_ms  # noqa: E402
from partition_notify.writers.lakehouse.schema import BEFORE_FIRST  # noqa: E402
from partition_notify.writers.lakehouse.store import LakehouseTables  # noqa: E402

from partition_notify.app import App, build_app  # noqa: E402
from partition_notify.settings import Settings  # noqa: E402

KEYS = {"iceberg": ["datestamp_day", "region"], "delta": ["datestamp", "region"]}
TICKS = os.sysconf("SC_CLK_TCK")
TIMEOUT = 120.0


class Lake:
    """The tables of one run: an Iceberg SQL catalog or Delta directories under ``root``."""

    def __init__(self, fmt: str, root: Path) -> None:
        self.format, self.root = fmt, root
        self.catalog_uri = f"sqlite:///{root}/catalog.db"
        (root / "wh").mkdir(exist_ok=True)
        self._catalog: Any = None
        self._tables: dict[str, Any] = {}

    def env(self) -> dict[str, str]:
        p = "PN_ICEBERG_CATALOG__LAKE__"
        return {f"{p}TYPE": "sql", f"{p}URI": self.catalog_uri,
                f"{p}WAREHOUSE": (self.root / "wh").as_uri()}

    def _cat(self) -> Any:
        if self._catalog is None:
            from pyiceberg.catalog import load_catalog

            self._catalog = load_catalog("lake", type="sql", uri=self.catalog_uri,
                                         warehouse=(self.root / "wh").as_uri())
        return self._catalog

    def create(self, name: str) -> int:
        """The table with one commit (day -1); that commit's revision."""
        if self.format == "iceberg":
            from tests.lakehouse.helpers import iceberg_table

            self._tables[name] = iceberg_table(self._cat(), f"bench.{name}")
        return self.commit(name, -1)

    def commit(self, name: str, n: int) -> int:
        """Append one row into a new partition (day ``n``; ``create`` writes day -1);
        the new commit's revision."""
        day = time.strftime("%Y-%m-%d", time.gmtime(86400 * (20000 + n)))
        if self.format == "iceberg":
            from tests.lakehouse.helpers import rows

            table = self._tables.get(name) or self._cat().load_table(f"bench.{name}")
            self._tables[name] = table
            table.append(rows(table, (day, "us", n)))
            return int(table.current_snapshot().snapshot_id)
        from deltalake import DeltaTable, write_deltalake

        from tests.lakehouse.helpers import delta_rows

        path = str(self.root / name)
        write_deltalake(path, delta_rows((day.replace("-", ""), "us", n)), mode="append",
                        partition_by=["datestamp", "region"])
        return int(DeltaTable(path).version())

    def head(self, name: str) -> int:
        """The table's current commit."""
        if self.format == "iceberg":
            return int(self._cat().load_table(f"bench.{name}").current_snapshot().snapshot_id)
        from deltalake import DeltaTable

        return int(DeltaTable(str(self.root / name)).version())

    def register(self, app: App, name: str, head: int | None) -> None:
        info = app.publisher.register_table("bench", name, KEYS[self.format])
        where: dict[str, str] = ({"catalog": "lake", "identifier": f"bench.{name}"}
                                 if self.format == "iceberg"
                                 else {"location": str(self.root / name)})
        LakehouseTables(app.store).register(
            info, self.format, start=BEFORE_FIRST if head is None else head, **where)


def start_serve(store_url: str, lake: Lake, interval: float, log: Path,
                tree: Path = ROOT) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PN_STORE_URL": store_url,
           "PN_TRANSPORT_URL": "embedded://", **lake.env(),
           f"PN_{lake.format.upper()}_POLL_INTERVAL_SECONDS": str(interval)}
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "partition_notify.cli", "serve"],
                                cwd=tree, env=env, stdout=fh, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + TIMEOUT
    while "serving:" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"serve did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.1)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)


def latency(fmt: str, interval: float, n: int) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="pn-bench-lake-") as tmp:
        root = Path(tmp)
        lake, url = Lake(fmt, root), f"sqlite:///{root}/store.db"
        with build_app(store_url=url, transport_url="embedded://") as app:
            lake.register(app, "t0", lake.create("t0"))
            proc = start_serve(url, lake, interval, root / "serve.log")
            try:
                out = []
                for i in range(0, n + 1):  # commit 0 warms serve up (imports): not counted
                    time.sleep(random.uniform(0, interval))
                    before = app.store.log.max_event_id()
                    lake.commit("t0", i)
                    t0 = time.perf_counter()
                    while app.store.log.max_event_id() == before:
                        if time.perf_counter() - t0 > TIMEOUT:
                            raise SystemExit(f"commit {i} not announced in {TIMEOUT} s")
                        time.sleep(0.01)
                    out.append(time.perf_counter() - t0)
                return out[1:]
            finally:
                stop(proc)


def writer(fmt: str, root: str, names: list[str], every: float, stop_at: float,
           out: Any) -> None:
    """Commit to every table of ``names`` each ``every`` s until ``stop_at``; count them.
    Each commit is a new day (a new partition), numbered on after earlier rounds."""
    lake, n = Lake(fmt, Path(root)), 0
    i = int(time.time() * 1000) % 10**6  # a day no earlier round wrote
    while time.time() < stop_at:
        started = time.monotonic()
        for name in names:
            lake.commit(name, i)
            n += 1
        i += 1
        time.sleep(max(0.0, every - (time.monotonic() - started)))
    out.put(n)


def proc_cpu_rss(pid: int) -> tuple[float, float]:
    """(CPU seconds so far, RSS MiB) of ``pid``."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(stat[11]) + int(stat[12])) / TICKS
    rss = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text()
               .splitlines() if line.startswith("VmRSS:"))
    return cpu, rss / 1024


def load(fmt: str, idle: int, busy: int, every: float, seconds: float,
         trees: list[Path], rounds: int) -> dict[Path, dict[str, float]]:
    """The load figures of ``serve`` from each source tree, on the same tables, in
    alternating rounds (medians over rounds): the baseline beside ours in one run."""
    interval = Settings.model_fields[f"{fmt}_poll_interval_seconds"].default
    with tempfile.TemporaryDirectory(prefix="pn-bench-lake-") as tmp:
        root = Path(tmp)
        lake = Lake(fmt, root)
        names = [f"t{i}" for i in range(idle + busy)]
        started = time.monotonic()
        heads = {name: lake.create(name) for name in names}
        print(f"  {len(names)} {fmt} tables created in {time.monotonic() - started:.0f} s")
        runs: dict[Path, list[dict[str, float]]] = {t: [] for t in trees}
        for r in range(rounds):
            for tree in trees:
                runs[tree].append(_load_round(lake, root / f"store-{r}-{len(runs[tree])}-"
                                              f"{trees.index(tree)}.db", names, heads, idle,
                                              every, seconds, interval, tree))
    return {t: {k: statistics.median(x[k] for x in rs) for k in rs[0]}
            for t, rs in runs.items()}


def _load_round(lake: Lake, db: Path, names: list[str], heads: dict[str, int], idle: int,
                every: float, seconds: float, interval: float,
                tree: Path) -> dict[str, float]:
    """One serve from ``tree`` on a fresh store following every table from its head."""
    root, url = lake.root, f"sqlite:///{db}"
    with build_app(store_url=url, transport_url="embedded://") as app:
        for name in names:  # followed after their current commit
            lake.register(app, name, heads[name])
        proc = start_serve(url, lake, interval, db.with_suffix(".log"), tree)
        ctx = multiprocessing.get_context("spawn")
        q = ctx.Queue()
        try:
            time.sleep(2 * interval)  # the first run starts every table's cursor
            stop_at = time.time() + seconds
            w = ctx.Process(target=writer, args=(lake.format, str(root), names[idle:], every,
                                                 stop_at, q))
            w.start()
            events0, cpus, rss = app.store.log.max_event_id(), [], []
            for _ in range(3):
                c0, _r = proc_cpu_rss(proc.pid)
                t0 = time.monotonic()
                time.sleep(seconds / 3)
                c1, r1 = proc_cpu_rss(proc.pid)
                cpus.append((c1 - c0) / (time.monotonic() - t0))
                rss.append(r1)
            written = q.get(timeout=TIMEOUT)
            w.join(30)
            time.sleep(interval)  # the last poll of what was written in the window
            announced = app.store.log.max_event_id() - events0
        finally:
            stop(proc)
            text = db.with_suffix(".log").read_text().splitlines()
            errors = [line for line in text if " WARNING " in line or " ERROR " in line]
            if errors:
                print(f"  serve logged {len(errors)} warning(s)/error(s), e.g. {errors[0]}")
        for name in names[idle:]:  # the next round starts after this one's commits
            heads[name] = lake.head(name)
    return {"cpu": statistics.median(cpus), "rss": statistics.median(rss),
            "written": written / seconds, "announced": announced / seconds,
            "interval": interval}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--format", choices=["iceberg", "delta", "both"], default="both")
    ap.add_argument("--latency-commits", type=int, default=20)
    ap.add_argument("--short-interval", type=float, default=0.2)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--busy", type=int, default=100)
    ap.add_argument("--commit-every", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--part", choices=["latency", "load", "both"], default="both")
    ap.add_argument("--baseline", help="another source tree (e.g. /work/main) whose serve "
                    "runs the load part beside ours, rounds alternating")
    ap.add_argument("--rounds", type=int, default=1, help="load rounds per tree")
    args = ap.parse_args()
    print(machine_note())
    for fmt in ["iceberg", "delta"] if args.format == "both" else [args.format]:
        default = Settings.model_fields[f"{fmt}_poll_interval_seconds"].default
        for interval in (default, args.short_interval) if args.part != "load" else ():
            lat = latency(fmt, interval, args.latency_commits)
            print(f"{fmt} commit -> add-partition, poll {interval:g} s, "
                  f"{len(lat)} commits: {summary_ms(lat)}")
        if args.part == "latency":
            continue
        trees = [*([Path(args.baseline)] if args.baseline else []), ROOT]
        results = load(fmt, args.idle, args.busy, args.commit_every, args.seconds, trees,
                       args.rounds)
        for tree, r in results.items():
            who = "ours" if tree == ROOT else f"baseline {tree}"
            print(f"{fmt} load ({who}): {args.idle} idle + {args.busy} busy tables, poll "
                  f"{r['interval']:g} s: serve CPU {100 * r['cpu']:.0f}% of a core "
                  f"(median), RSS {r['rss']:.0f} MiB; commits written {r['written']:.1f}/s, "
                  f"announced {r['announced']:.1f}/s")
        print(machine_note())


if __name__ == "__main__":
    main()
