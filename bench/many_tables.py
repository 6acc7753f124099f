"""One subscriber following N tables: threads, RSS, connections, subscribe time, delivery.

    eval "$(bash scripts/services.sh env)"
    PYTHONPATH=. python bench/many_tables.py [--n 1000,10000,100000]
        [--transport embedded://] [--transport "kafka://127.0.0.1:9092" --policy single]

Goal (#20): 100,000 tables, 1 connection, <= 4 threads, <= 500 MB RSS, subscribe <= 10 s.
Per N: a fresh SQLite store gets N tables in one transaction (the catalog's own
rows, one Core ``INSERT``: registering 100,000 one call at a time would take minutes
and is not what is measured), then a subscriber in its own process subscribes
to all N (history on, as by default); it reports subscribe time, threads, RSS and
its connections (established TCP: the broker's, a PostgreSQL store's; the goal's
"1 connection") and, beside them, its SQLite connections to the store file (the
embedded transport on SQLite has no network connection: the pool's, the log
reader's and the wake-up thread's, the same at every N),
then this process publishes one set-done to the last table and times its delivery.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from partition_notify.core.redact import redact_url

GOALS = {"connections": 1, "threads": 4, "rss_mb": 500, "subscribe_s": 10}


def seed(store_url: str, n: int, policy: str) -> None:
    from partition_notify.store.schema import TableRow
    from sqlalchemy import insert

    from partition_notify.app import build_app
    from partition_notify.contract.topics import TopicPolicy, topic_for

    with build_app(store_url=store_url, transport_url="embedded://") as app:
        now = time.time()
        with app.store.engine.begin() as conn:
            conn.execute(insert(TableRow.__table__), [  # type: ignore[arg-type]
                {"db": "many", "name": f"t{i:06d}", "partition_keys": ["ds"],
                 "topic": topic_for("many", f"t{i:06d}", policy=TopicPolicy(policy)),
                 "topic_override": None, "retention_seconds": 3600, "location": None,
                 "created_at": now} for i in range(n)])


def child(args: argparse.Namespace) -> None:
    import psutil

    from partition_notify.app import build_app

    # Every delivery is recorded: the set-done may arrive before its id is read
    # from stdin (a callback that only knew the awaited id then dropped it, and
    # the wait ran out: the "not delivered within 60 s" of the first run).
    arrived: dict[str, float] = {}
    cond = threading.Condition()

    def on_message(m: Any) -> None:
        with cond:
            arrived[m.message_id] = time.time()  # the parent's clock too
            cond.notify_all()

    app = build_app(store_url=args.store_url, transport_url=args.transport,
                    topic_policy=args.policy, connect_timeout_seconds=60)
    sub = app.subscriber()
    started, cpu = time.perf_counter(), time.process_time()
    sub.subscribe([("many", f"t{i:06d}") for i in range(args.child)], on_message)
    took, cpu = time.perf_counter() - started, time.process_time() - cpu
    proc = psutil.Process()
    store_file = args.store_url.split("///", 1)[-1]
    tcp = [c for c in proc.net_connections("tcp") if c.status == psutil.CONN_ESTABLISHED]
    # One open descriptor of the database file per SQLite connection (its -wal and
    # -shm are other paths).
    files = [f for f in proc.open_files() if f.path == store_file]
    print(json.dumps({"subscribe_s": took, "subscribe_cpu_s": cpu,
                      "threads": proc.num_threads(),
                      "rss_mb": proc.memory_info().rss / 2**20,
                      "connections": len(tcp), "sqlite_connections": len(files)}),
          flush=True)
    wanted = sys.stdin.readline().strip()
    with cond:
        early = wanted in arrived
        ok = cond.wait_for(lambda: wanted in arrived, 60)
    print(json.dumps({"delivered": ok, "before_asked": early, "at": arrived.get(wanted)}),
          flush=True)
    sub.close()
    app.close()


def one(args: argparse.Namespace, url: str, n: int, python: str, k: int) -> dict[str, object]:
    """One child (``python``: ours or the baseline's interpreter) on the seeded store;
    round ``k`` publishes to its own table so each round's history is alike."""
    from partition_notify.app import build_app

    env = dict(os.environ)
    if python != sys.executable:  # the baseline venv's editable install maps its own tree
        env.pop("PYTHONPATH", None)
    proc = subprocess.Popen(
        [python, __file__, "--child", str(n), "--store-url", url,
         "--transport", args.transport, "--policy", args.policy],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdin and proc.stdout
    try:
        ready = json.loads(proc.stdout.readline() or '{"error": "child died"}')
        with build_app(store_url=url, transport_url=args.transport,
                       topic_policy=args.policy) as app:
            t0 = time.time()
            msg = app.publisher.send_mark_set_done("many", f"t{n - 1 - k:06d}", "ds=1")
            proc.stdin.write(msg.message_id + "\n")
            proc.stdin.flush()
            done = json.loads(proc.stdout.readline() or "{}")
            ready["delivery_s"] = done["at"] - t0 if done.get("delivered") else None
            # Arrived before its id was read: the first run's callback dropped it.
            ready["before_asked"] = done.get("before_asked")
        return ready
    finally:
        proc.wait(120)


def median_of(runs: list[dict[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key in runs[0]:
        vals = [r.get(key) for r in runs]
        nums = [float(v) for v in vals  # type: ignore[arg-type]
                if isinstance(v, (int, float)) and not isinstance(v, bool)]
        out[key] = round(statistics.median(nums), 3) if len(nums) == len(vals) else vals
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default="1000,10000,100000")
    ap.add_argument("--transport", default="embedded://")
    ap.add_argument("--policy", default="per-table", choices=["per-table", "per-database",
                                                               "single"])
    ap.add_argument("--rounds", type=int, default=1, help="alternating rounds per N")
    ap.add_argument("--baseline-python", help="the interpreter of another checkout's own "
                    "venv (e.g. /work/main/.venv/bin/python): its subscriber beside ours")
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--store-url", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    from core_common import machine_note

    print(f"one subscriber, {redact_url(args.transport)}, topic policy {args.policy}; "
          f"goals {GOALS}")
    who = {"ours": sys.executable, **({"baseline": args.baseline_python}
                                      if args.baseline_python else {})}
    for n in (int(x) for x in args.n.split(",")):
        url = f"sqlite:///{tempfile.mkdtemp(prefix='pn-bench-many-')}/store.db"
        seed(url, n, args.policy)
        runs: dict[str, list[dict[str, object]]] = {w: [] for w in who}
        for k in range(args.rounds):
            order = list(who) if k % 2 == 0 else list(reversed(who))
            for w in order:
                runs[w].append(one(args, url, n, who[w], sum(map(len, runs.values()))))
        for w, rs in runs.items():
            r = median_of(rs)
            verdict = " ".join(
                f"{k} {'ok' if float(r.get(k, 1e9)) <= g else 'MISS'}"  # type: ignore[arg-type]
                for k, g in GOALS.items())
            print(f"N={n:>7} {w:>8}: {json.dumps(r)}  [{verdict}]", flush=True)
        print("  ", machine_note(), flush=True)
    print(machine_note(), f"pid {os.getpid()}")


if __name__ == "__main__":
    main()
