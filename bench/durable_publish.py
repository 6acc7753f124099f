"""Durable publish, one at a time: partition-notify next to its raw floor, in one run.

    PYTHONPATH=. python bench/durable_publish.py [--url stomp://127.0.0.1:61613]
        [--n 1000] [--rounds 5] [--eager]

Every publish is ``Publisher.send_mark_set_done`` end to end: the log commit
(SQLite, WAL, ``synchronous=FULL``, the store's default), the broker's receipt
(ActiveMQ over STOMP) and the mark that it was published. In alternating
rounds, medians:

  sqlite   raw sqlite3: one INSERT of a set-done sized row + COMMIT, WAL, synchronous=FULL
  stomp    raw stomp.py: one persistent SEND + its RECEIPT
  floor    the two back to back: 1 / (1/sqlite + 1/stomp)
  default  our publishes/s as configured by default (on this tree: marks batched off
           the hot path, PublisherConfig.mark_flush_interval_seconds)
  eager    our publishes/s marking each publish in its own commit (interval 0, the
           mark path before; --no-eager on a tree without the setting)

Each row also prints the client's CPU per call (all its threads, median of the
rounds), steadier than wall rates on a loaded machine. Goal: default >= 1,500
publishes/s. Needs ``eval "$(bash scripts/services.sh env)"``.

``--threads 1,4,16``: instead, N threads publish at once (n per round in all), group
commit (concurrent appends share a transaction: store/group_commit.py) against one
commit per publish (``EventLog.group_commit = False``: the threads take the log's
writer connection in turn, one transaction and one fsync each), in alternating
rounds; also appends per commit. Every publish still returns only once
its event is durable and the broker's receipt came.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from itertools import count

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from brokers_stomp import RawSender, app_for  # noqa: E402
from core_common import machine_note  # noqa: E402
from partition_notify.publisher import Publisher  # noqa: E402

from partition_notify.app import App  # noqa: E402
from partition_notify.contract import to_envelope  # noqa: E402
from partition_notify.core.redact import redact_url  # noqa: E402

GOAL = 1500.0


def raw_sqlite(path: str, body: str) -> Callable[[int], None]:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS ev (id INTEGER PRIMARY KEY, body TEXT)")

    def run(n: int) -> None:
        for _ in range(n):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO ev (body) VALUES (?)", (body,))
            conn.execute("COMMIT")

    return run


def publishes(app: App, table: str) -> Callable[[int], None]:
    app.publisher.register_table("bench", table, ["datestamp"])
    seq = count()

    def run(n: int) -> None:
        for _ in range(n):
            app.publisher.send_mark_set_done("bench", table, f"datestamp=d{next(seq)}")

    return run


def concurrent(app: App, table: str, threads: int, group: bool) -> Callable[[int], None]:
    app.publisher.register_table("bench", table, ["datestamp"])
    seq = count()

    def run(n: int) -> None:
        app.store.log.group_commit = group
        errors: list[BaseException] = []

        def worker(k: int) -> None:
            try:
                for _ in range(k):
                    app.publisher.send_mark_set_done("bench", table, f"datestamp=d{next(seq)}")
            except BaseException as exc:
                errors.append(exc)

        pool = [threading.Thread(target=worker, args=(n // threads,)) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(600)
        if errors:
            raise errors[0]

    return run


def threads_main(args: argparse.Namespace, tmp: str) -> None:
    for threads in (int(t) for t in args.threads.split(",")):
        app = app_for(args, f"sqlite:///{tmp}/threads{threads}.db")
        try:
            n = args.n - args.n % threads
            runs = {"one commit each": concurrent(app, "one", threads, False),
                    "group commit": concurrent(app, "group", threads, True)}
            group = app.store.log._group
            before = (group.commits, group.items)
            f = interleaved(args.rounds, n, runs)
            commits, items = group.commits - before[0], group.items - before[1]
        finally:
            app.close()
        base, ours = f["one commit each"], f["group commit"]
        print(f"{threads:>3} publishers: one commit each {base:>7.0f}/s   group commit "
              f"{ours:>7.0f}/s   {ours / base:5.2f}x   appends per commit "
              f"{items / max(commits, 1):.1f}")
    print(machine_note())


def interleaved(rounds: int, n: int, runs: dict[str, Callable[[int], None]]) -> dict[str, float]:
    """Median rate of each contender, and as ``NAME_cpu_us`` its median client CPU per
    call: on a loaded machine wall rates swing with the disk, CPU is steadier."""
    rates: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(rounds):
        order = list(runs.items()) if r % 2 == 0 else list(reversed(runs.items()))
        for name, fn in order:
            started, c0 = time.perf_counter(), time.process_time()
            fn(n)
            rates[name].append(n / (time.perf_counter() - started))
            cpu[name].append((time.process_time() - c0) / n * 1e6)
    out = {name: statistics.median(v) for name, v in rates.items()}
    out.update({f"{name}_cpu_us": statistics.median(v) for name, v in cpu.items()})
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--url", default=os.environ.get("PN_TEST_STOMP_URL", "stomp://127.0.0.1:61613"))
    p.add_argument("--user", default=os.environ.get("PN_TEST_BROKER_USERNAME", "pn_service"))
    p.add_argument("--password", default=os.environ.get("PN_TEST_BROKER_PASSWORD", ""))
    p.add_argument("--n", type=int, default=1000, help="publishes per round and contender")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    p.add_argument("--threads", default="",
                   help="e.g. 1,4,16: concurrent publishers, group commit vs one commit each")
    p.add_argument("--no-eager", action="store_true",
                   help="leave out the eager row (a tree without mark_flush_interval_seconds)")
    args = p.parse_args()

    tmp = tempfile.mkdtemp(prefix="pn-bench-durable-")
    if args.threads:
        print("Durable publish, N threads at once: SQLite synchronous=FULL + "
              f"{redact_url(args.url)} "
              f"(median of {args.rounds} alternating rounds of {args.n})")
        threads_main(args, tmp)
        return
    host, port = args.url.split("://", 1)[1].split("/")[0].rsplit(":", 1)
    lazy = app_for(args, f"sqlite:///{tmp}/lazy.db")
    apps = [lazy]
    runs: dict[str, Callable[[int], None]] = {}
    raw = RawSender(host, int(port), args.user, args.password)
    try:
        runs["lazy"] = publishes(lazy, "lazy")
        if not args.no_eager:
            eager = app_for(args, f"sqlite:///{tmp}/eager.db")
            apps.append(eager)
            eager.publisher = Publisher(eager.store, eager.transport, dataclasses.replace(
                eager.publisher.config, mark_flush_interval_seconds=0.0))
            runs["eager"] = publishes(eager, "eager")
        env = to_envelope(lazy.publisher.send_mark_set_done("bench", "lazy", "datestamp=x"))
        dest = f"/topic/{env.topic}"
        runs["sqlite"] = raw_sqlite(f"{tmp}/raw.db", env.body.decode())
        runs["stomp"] = lambda n: [raw.send_sync(dest, env.body, env.headers) for _ in range(n)]
        figures = interleaved(args.rounds, args.n, runs)
    finally:
        raw.close()
        for app in apps:
            app.close()
    report(args, figures)
    print(machine_note())


def report(args: argparse.Namespace, f: dict[str, float]) -> None:
    floor = 1 / (1 / f["sqlite"] + 1 / f["stomp"])
    print(f"\nDurable publish, one at a time: SQLite synchronous=FULL + {redact_url(args.url)} "
          f"(median of {args.rounds} alternating rounds of {args.n})\n")
    print(f"{'raw sqlite3 INSERT+COMMIT':36}{f['sqlite']:>9.0f} /s  ({1e3 / f['sqlite']:.3f} ms)"
          f"  cpu {f['sqlite_cpu_us']:.0f} us")
    print(f"{'raw stomp.py SEND+RECEIPT':36}{f['stomp']:>9.0f} /s  ({1e3 / f['stomp']:.3f} ms)"
          f"  cpu {f['stomp_cpu_us']:.0f} us")
    print(f"{'floor (both, back to back)':36}{floor:>9.0f} /s  ({1e3 / floor:.3f} ms)")
    lazy = f["lazy"]
    verdict = "ok" if lazy >= GOAL else "MISS"
    print(f"{'send_mark_set_done, default':36}{lazy:>9.0f} /s  ({1e3 / lazy:.3f} ms)"
          f"  {lazy / floor:.2f}x floor  goal >= {GOAL:,.0f}/s {verdict}"
          f"  cpu {f['lazy_cpu_us']:.0f} us")
    if "eager" in f:
        eager = f["eager"]
        print(f"{'send_mark_set_done, eager marks':36}{eager:>9.0f} /s  ({1e3 / eager:.3f} ms)"
              f"  {eager / floor:.2f}x floor  cpu {f['eager_cpu_us']:.0f} us")


if __name__ == "__main__":
    main()
