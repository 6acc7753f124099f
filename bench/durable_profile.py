"""Where a durable publish's time goes: WAL pages per commit, per-phase wall time, cProfile.

    PYTHONPATH=. python bench/durable_profile.py pages   [--n 50]
    PYTHONPATH=. python bench/durable_profile.py phases  [--n 500]
    PYTHONPATH=. python bench/durable_profile.py profile [--n 1000] [--what set-done|announce]

``pages``: the SQLite pages one commit writes to the WAL, ours (a set-done publish, and
announce_partitions of --batch partitions) against the raw one-row INSERT+COMMIT of
bench/durable_publish.py, each page named by the b-tree it belongs to (``dbstat``).
The WAL is truncated first and --n commits stay under the auto-checkpoint's 1,000 pages.

``phases``: median wall time per publish of the table read, the message build and size
check, the log append (BEGIN .. COMMIT) and the broker's send + receipt.

``profile``: cProfile with ``time.process_time`` as its clock (CPU, not waits), top 30
by own time. Needs ``eval "$(bash scripts/services.sh env)"`` for the broker.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import sqlite3
import statistics
import struct
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from brokers_stomp import app_for  # noqa: E402
from core_common import machine_note  # noqa: E402

from partition_notify.app import App  # noqa: E402

WAL_HEADER, FRAME_HEADER = 32, 24


def wal_pages(db: str) -> list[int]:
    """Page numbers of every frame in ``db``'s WAL since it was last truncated."""
    with open(db + "-wal", "rb") as fh:
        data = fh.read()
    if len(data) < WAL_HEADER:
        return []
    page_size = struct.unpack(">I", data[8:12])[0]
    pages, at = [], WAL_HEADER
    while at + FRAME_HEADER + page_size <= len(data):
        pages.append(struct.unpack(">I", data[at:at + 4])[0])
        at += FRAME_HEADER + page_size
    return pages


def truncate_wal(db: str) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def page_owners(db: str, pages: list[int]) -> collections.Counter[str]:
    conn = sqlite3.connect(db)
    owner = dict(conn.execute("SELECT pageno, name FROM dbstat"))
    conn.close()
    return collections.Counter(owner.get(p, "(header/free)" if p == 1 else "(new)")
                               for p in pages)


def measure_pages(label: str, db: str, n: int, commit: collections.abc.Callable[[], None]) -> None:
    truncate_wal(db)
    for _ in range(n):
        commit()
    pages = wal_pages(db)
    print(f"\n{label}: {len(pages) / n:.1f} WAL pages per commit "
          f"({len(pages) * 4096 / n / 1024:.0f} KiB), by b-tree:")
    for name, k in page_owners(db, pages).most_common():
        print(f"    {name:32} {k / n:5.2f}")


def pages_main(args: argparse.Namespace, app: App, tmp: str) -> None:
    db = f"{tmp}/store.db"
    app.publisher.register_table("bench", "pages", ["datestamp", "part"])
    seq = iter(range(10**9))
    for _ in range(200):  # warm: counters exist, the b-trees are past their first pages
        app.publisher.send_mark_set_done("bench", "pages", f"datestamp=w{next(seq)}")
    measure_pages("set-done publish", db, args.n, lambda: app.publisher.send_mark_set_done(
        "bench", "pages", f"datestamp=d{next(seq)}"))
    measure_pages(f"announce_partitions of {args.batch}", db, 1,
                  lambda: app.publisher.announce_partitions("bench", "pages", [
                      {"datestamp": f"a{next(seq)}", "part": f"p{i:05d}"}
                      for i in range(args.batch)]))
    raw = f"{tmp}/raw.db"
    conn = sqlite3.connect(raw, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE ev (id INTEGER PRIMARY KEY, body TEXT)")
    body = "x" * 600

    def raw_commit() -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO ev (body) VALUES (?)", (body,))
        conn.execute("COMMIT")

    for _ in range(200):
        raw_commit()
    measure_pages("raw sqlite3 INSERT+COMMIT", raw, args.n, raw_commit)


def phases_main(args: argparse.Namespace, app: App) -> None:
    pub = app.publisher
    pub.register_table("bench", "phases", ["datestamp"])
    times: dict[str, list[float]] = collections.defaultdict(list)
    for i in range(args.n):
        t0 = time.perf_counter()
        info = pub.table("bench", "phases")
        t1 = time.perf_counter()
        done = pub.validate_set_done(info, f"datestamp=p{i}")
        draft, size = pub._set_done_sized(info, done, None)
        pub._refuse_over(draft, size, "set-done", None)
        t2 = time.perf_counter()
        logged = app.store.log.append([draft], published=False)
        t3 = time.perf_counter()
        pub._deliver(logged)
        t4 = time.perf_counter()
        for name, a, b in (("table read", t0, t1), ("build + size check", t1, t2),
                           ("log append (BEGIN..COMMIT)", t2, t3),
                           ("send + receipt + mark", t3, t4)):
            times[name].append((b - a) * 1e3)
    print(f"\nper-phase wall time, median of {args.n} set-done publishes:")
    for name, v in times.items():
        print(f"    {name:30} {statistics.median(v):7.3f} ms  (p90 "
              f"{statistics.quantiles(v, n=10)[-1]:.3f})")


def profile_main(args: argparse.Namespace, app: App) -> None:
    pub = app.publisher
    pub.register_table("bench", "prof", ["datestamp", "part"])
    seq = iter(range(10**9))
    if args.what == "announce":
        def one() -> None:
            pub.announce_partitions("bench", "prof", [
                {"datestamp": f"a{next(seq)}", "part": f"p{i:05d}"} for i in range(args.batch)])
    else:
        def one() -> None:
            pub.send_mark_set_done("bench", "prof", f"datestamp=d{next(seq)}")
    one()
    prof = cProfile.Profile(time.process_time)
    c0 = time.process_time()
    prof.enable()
    for _ in range(args.n):
        one()
    prof.disable()
    cpu = (time.process_time() - c0) / args.n * 1e6
    print(f"\n{args.what}: client CPU {cpu:.0f} us per call (under the profiler)")
    for key in ("tottime", "cumulative"):
        pstats.Stats(prof).sort_stats(key).print_stats(args.top)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("mode", choices=("pages", "phases", "profile"))
    p.add_argument("--url", default=os.environ.get("PN_TEST_STOMP_URL", "stomp://127.0.0.1:61613"))
    p.add_argument("--user", default=os.environ.get("PN_TEST_BROKER_USERNAME", "pn_service"))
    p.add_argument("--password", default=os.environ.get("PN_TEST_BROKER_PASSWORD", ""))
    p.add_argument("--n", type=int, default=0, help="commits (pages 50, phases 500, "
                   "profile 1000 set-dones or 5 announces)")
    p.add_argument("--batch", type=int, default=10_000, help="partitions per announce")
    p.add_argument("--top", type=int, default=30, help="profile rows shown")
    p.add_argument("--what", choices=("set-done", "announce"), default="set-done")
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="pn-bench-profile-")
    app = app_for(args, f"sqlite:///{tmp}/store.db")
    try:
        if args.mode == "pages":
            args.n = args.n or 50
            pages_main(args, app, tmp)
        elif args.mode == "phases":
            args.n = args.n or 500
            phases_main(args, app)
        else:
            args.n = args.n or (1000 if args.what == "set-done" else 5)
            profile_main(args, app)
    finally:
        app.close()
    print(machine_note())


if __name__ == "__main__":
    main()
